"""Thin views: a selector wired to a serializer or a renderer (docs/api.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.contrib.auth.models import AbstractBaseUser
from django.db import router, transaction
from django.http import HttpResponseBase, StreamingHttpResponse
from django.utils.http import parse_etags
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import JSONRenderer
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
from chat.api.served import KeepsHttpRequest
from chat.exports import FORMATS, account_names_for_user, export_envelope_head, session_markdown
from chat.models import ChatLog, ChatSession
from chat.selectors import (
    SessionListPages,
    session_detail_for_user,
    session_get_for_user,
    session_list_for_user,
    session_messages,
)
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

    @extend_schema(
        responses={
            200: ChatSessionListSerializer(many=True),
            404: OpenApiResponse(
                description='`?page=` past the last page, or not a page number: `{"detail": "Invalid page."}`.'
            ),
        }
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

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


class SessionDetailView(KeepsHttpRequest, APIView):
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
        content = _async_chunks(streamed) if self.served_async else streamed
        return StreamingHttpResponse(content, content_type="application/json", headers=headers)


class _ExportNegotiation(BaseContentNegotiation):
    """`?format=` names the export's format here, not DRF's renderer; refusals are JSON."""

    def select_parser(self, request: Request, parsers: Any) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(self, request: Request, renderers: Any, format_suffix: str | None = None) -> Any:
        return JSONRenderer(), JSONRenderer.media_type


_EXPORT_TYPES = {"json": "application/json", "md": "text/markdown; charset=utf-8"}


class SessionExportView(KeepsHttpRequest, APIView):
    """One of the caller's sessions as a file (docs/api.md#exporting-a-session): `?format=json` (the default),
    the stored rows in an envelope `import_turns` takes back, or `?format=md`, for a person."""

    content_negotiation_class = _ExportNegotiation

    @extend_schema(
        parameters=[
            OpenApiParameter("format", str, enum=list(FORMATS), description="`json` (default) or `md`."),
        ],
        responses={
            (200, "application/json"): OpenApiResponse(
                OpenApiTypes.OBJECT,
                description='`{"format": "silvia-chat-export", "version": 1, "user", "session": <the GET body>}`',
            ),
            (200, "text/markdown"): OpenApiResponse(OpenApiTypes.STR, description="The answers with footnotes."),
            400: OpenApiResponse(description='An unknown `format`: `{"format": [...]}`.'),
            404: OpenApiResponse(description="Not found."),
        },
    )
    def get(self, request: Request, session_id: str) -> HttpResponseBase:
        kind = request.query_params.get("format", "json")
        if kind not in FORMATS:
            raise ValidationError({"format": [f"Expected one of: {', '.join(FORMATS)}."]})
        user = cast(AbstractBaseUser, request.user)
        session = session_get_for_user(session_id=session_id, user=user)
        if session is None:
            raise NotFound()
        if kind == "json":
            chunks: Chunks = _export_json(session, user.get_username())
        else:
            chunks = _export_markdown(session, user)
        streamed = _in_transaction(chunks)
        content = _async_chunks(streamed) if self.served_async else streamed
        response = StreamingHttpResponse(content, content_type=_EXPORT_TYPES[kind])
        response["Content-Disposition"] = f'attachment; filename="silvia-conversation-{session.id}.{kind}"'
        response["Cache-Control"] = _CACHE_CONTROL
        return response


def _export_json(session: ChatSession, username: str) -> Chunks:
    yield export_envelope_head(username=username)
    yield from session_detail_chunks(session=session, chunk_rows=CHUNK_ROWS)
    yield b"}\n"


def _export_markdown(session: ChatSession, user: AbstractBaseUser) -> Chunks:
    logs = session_messages(session=session).iterator(chunk_size=CHUNK_ROWS)
    for piece in session_markdown(session=session, logs=logs, account_names=account_names_for_user(user=user)):
        yield piece.encode()
