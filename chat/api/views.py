"""Thin views: a selector wired to a serializer or a renderer (docs/api.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.contrib.auth.models import AbstractBaseUser
from django.core.handlers.asgi import ASGIRequest
from django.db import router, transaction
from django.http import HttpResponseBase, StreamingHttpResponse
from django.utils.http import parse_etags
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chat.api.pagination import SessionPagination
from chat.api.rendering import (
    CHUNK_ROWS,
    EncodedJSONRenderer,
    session_detail_chunks,
    session_detail_etag,
    session_detail_json,
    session_list_json,
)
from chat.api.serializers import ChatSessionDetailSerializer, ChatSessionListSerializer
from chat.models import ChatLog
from chat.selectors import SessionListPages, session_detail_for_user, session_list_for_user
from citations.uuids import parse_uuid

# Revalidate every time (the ETag makes that a 304); the body is one user's data.
_CACHE_CONTROL = "private, no-cache"


class SessionListView(generics.ListAPIView):
    """The caller's chat sessions, most recently active first, paginated."""

    # The schema is `ChatSessionListSerializer`'s; the body is built by
    # `chat.api.rendering.session_list_json` from `LIST_COLUMNS` tuples.
    serializer_class = ChatSessionListSerializer
    pagination_class = SessionPagination
    renderer_classes = (EncodedJSONRenderer,)

    def get_queryset(self):
        return session_list_for_user(user=cast(AbstractBaseUser, self.request.user))

    def list(self, request: Request, *args: object, **kwargs: object) -> Response:
        paginator = cast(SessionPagination, self.paginator)
        pages = SessionListPages(user=cast(AbstractBaseUser, request.user))
        # SessionListPages is what SessionPaginator pages (count() and page()), not a queryset.
        rows: list[Any] | None = paginator.paginate_queryset(pages, request, view=self)  # type: ignore[arg-type]
        assert rows is not None and paginator.page is not None  # PAGE_SIZE is set
        body = session_list_json(
            count=paginator.page.paginator.count,
            next_link=paginator.get_next_link(),
            previous_link=paginator.get_previous_link(),
            rows=rows,
        )
        return Response(body)


Chunks = Generator[bytes, None, None]


def _in_transaction(chunks: Chunks) -> Chunks:
    # Inside a transaction PostgreSQL's server-side cursor is not WITH HOLD,
    # so rows stream from the server instead of being materialised first;
    # on the database the rows are read from (the read replica, when it has the caller's writes).
    with transaction.atomic(using=router.db_for_read(ChatLog)):
        yield from chunks


def _next(chunks: Chunks) -> bytes | None:
    return next(chunks, None)


async def _async_chunks(chunks: Chunks) -> AsyncIterator[bytes]:
    # Under ASGI Django buffers a sync iterator whole; each step runs in the
    # request's own thread (thread_sensitive), where its connection lives.
    step = sync_to_async(_next, thread_sensitive=True)
    try:
        while (chunk := await step(chunks)) is not None:
            yield chunk
    finally:
        await sync_to_async(chunks.close, thread_sensitive=True)()


class SessionDetailView(APIView):
    """One of the caller's sessions with its messages, oldest first.

    `?after=<message id>` returns only the messages after that one. The
    response carries an `ETag`; `If-None-Match` with it answers 304. Another
    user's session, a missing one and a malformed id are all the same 404,
    so ids cannot be probed.
    """

    # The body is `ChatSessionDetailSerializer`'s JSON, built by
    # `chat.api.rendering` without decoding the JSON columns, and streamed
    # when it spans more than one chunk of rows.
    renderer_classes = (EncodedJSONRenderer,)

    @extend_schema(
        parameters=[
            OpenApiParameter("after", OpenApiTypes.UUID, description="only the messages after this message id")
        ],
        responses={
            200: ChatSessionDetailSerializer,
            304: OpenApiResponse(description="Not modified (If-None-Match matched the ETag)."),
            400: OpenApiResponse(description="`after` is not a message id of this session."),
            404: OpenApiResponse(description="Not found."),
        },
    )
    def get(self, request: Request, session_id: str) -> HttpResponseBase:
        after_id = None
        if "after" in request.query_params:
            after_id = parse_uuid(request.query_params["after"])
            if after_id is None:
                raise ValidationError({"after": ["expected a message id (a UUID)."]})
        detail = session_detail_for_user(
            session_id=session_id, user=cast(AbstractBaseUser, request.user), after=after_id
        )
        if detail is None:
            raise NotFound()
        if after_id is not None and detail.after is None:
            raise ValidationError({"after": [f"no message {after_id} in this session."]})
        session, after = detail.session, detail.after

        headers = {"ETag": session_detail_etag(detail=detail, after=after_id), "Cache-Control": _CACHE_CONTROL}
        etags = parse_etags(request.META.get("HTTP_IF_NONE_MATCH", ""))  # not `.headers`: it copies every header
        if "*" in etags or any(etag.removeprefix("W/") == headers["ETag"] for etag in etags):
            return Response(status=304, headers=headers)

        renderer = self.get_renderers()[0]
        indented = (
            isinstance(renderer, EncodedJSONRenderer)
            and renderer.get_indent(request.accepted_media_type or "", {}) is not None
        )
        if detail.message_count <= CHUNK_ROWS or indented:
            return Response(session_detail_json(session=session, after=after), headers=headers)
        streamed = _in_transaction(session_detail_chunks(session=session, after=after, chunk_rows=CHUNK_ROWS))
        content = _async_chunks(streamed) if isinstance(request._request, ASGIRequest) else streamed
        return StreamingHttpResponse(content, content_type="application/json", headers=headers)
