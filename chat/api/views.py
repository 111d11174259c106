"""Thin views: a selector wired to a serializer or a renderer (SPEC section 10)."""
from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chat.api.pagination import SessionPagination
from chat.api.rendering import EncodedJSONRenderer, session_detail_json
from chat.api.serializers import ChatSessionDetailSerializer, ChatSessionListSerializer
from chat.selectors import session_get_for_user, session_list_for_user


class SessionListView(generics.ListAPIView):
    """The caller's chat sessions, most recently active first, paginated."""

    serializer_class = ChatSessionListSerializer
    pagination_class = SessionPagination

    def get_queryset(self):
        return session_list_for_user(user=self.request.user)


class SessionDetailView(APIView):
    """One of the caller's sessions with its messages, oldest first.

    Another user's session, a missing one and a malformed id are all the same
    404, so ids cannot be probed.
    """

    # The body is `ChatSessionDetailSerializer`'s JSON, built by
    # `session_detail_json` without decoding the JSON columns (the docstring
    # above is the OpenAPI description, so the note lives here).
    renderer_classes = [EncodedJSONRenderer]

    @extend_schema(responses={200: ChatSessionDetailSerializer, 404: OpenApiResponse(description="Not found.")})
    def get(self, request: Request, session_id: str) -> Response:
        session = session_get_for_user(session_id=session_id, user=request.user)
        if session is None:
            raise NotFound()
        return Response(session_detail_json(session=session))
