"""Live turns over SSE (docs/live.md): thin views over `live`."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from chat.api.schema import EVENT_ID, EVENT_STREAM
from chat.api.served import KeepsHttpRequest
from chat.models import PromptVersion
from citations.ai_sdk import HEADERS as AI_SDK_HEADERS
from citations.ai_sdk import PROTOCOL as AI_SDK
from citations.uuids import parse_uuid
from live.admission import BUSY_DETAIL
from live.control_views import GONE, gone
from live.handoff import HANDOFF_HEADER, hand_off
from live.log import owned_turn, release_connection
from live.models import ACTIVE_STATUSES
from live.retention import turn_events_pruned
from live.service import (
    AdmissionBusyError,
    ModelNotConfiguredError,
    QueueFullError,
    QueueUnavailableError,
    SessionNotFoundError,
    TurnConflictError,
    TurnLimitError,
    turn_start,
)
from live.slots import STREAM_SLOTS
from live.stream import Opened, async_stream, closing, sync_stream


class _AlwaysJSON(BaseContentNegotiation):
    """Errors are JSON whatever `Accept` says (a client asks for `text/event-stream`)."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return JSONRenderer(), JSONRenderer.media_type


class TurnRequestSerializer(serializers.Serializer):
    """The POST body: `{"message": str, "prompt_version"?: "v5" | "legacy"}`."""

    message = serializers.CharField(max_length=settings.LIVE_TURN_MESSAGE_MAX_CHARS, allow_blank=False)
    prompt_version = serializers.ChoiceField(choices=PromptVersion.choices, default=PromptVersion.V5)


_STREAM = OpenApiResponse(EVENT_STREAM, description="The turn's events (docs/live.md).")
_PROTOCOL = OpenApiParameter(
    "protocol",
    str,
    OpenApiParameter.QUERY,
    required=False,
    enum=[AI_SDK],
    description=(
        "`ai-sdk`: the Vercel AI SDK's UI message stream (`x-vercel-ai-ui-message-stream: v1`) instead of this "
        "service's events (docs/live.md#the-ai-sdk-stream-protocolai-sdk). Any other value is a 400."
    ),
)


def stream_protocol(request: Request) -> str | None:
    """The stream the client asked for: None (ours) or `ai-sdk`. 400 for any other `?protocol=`."""
    protocol = request.query_params.get("protocol")
    if protocol is None or protocol == AI_SDK:
        return protocol
    raise ValidationError({"protocol": [f"Expected {AI_SDK!r}, or no protocol for this service's own events."]})


def event_stream(
    turn_id: uuid.UUID,
    after: int,
    *,
    asgi: bool,
    view: str,
    protocol: str | None,
    on_close: Callable[[], None] | None = None,
    opened: Opened | None = None,
) -> Any:
    """The SSE bytes of the turn's events after id `after` (SPEC 11; the AI SDK's: from the start): an async
    iterator (`asgi`, the event loop's) or a sync one (WSGI), counted in `silvia_sse_streams_open{view}`
    while it is served (docs/metrics.md); `on_close` is called once it ends, or when it is closed unread;
    `opened`: its start made already (`live.stream.Opened`, `asgi` only). Never raises."""
    from telemetry.metrics import count_open_stream  # with the first stream, not at start-up

    served: AsyncIterator[bytes] | Iterator[bytes] = (
        async_stream(turn_id, after, protocol=protocol, on_close=on_close, opened=opened)
        if asgi
        else sync_stream(turn_id, after, protocol=protocol, on_close=on_close)
    )
    stream = count_open_stream(served, view=view)
    if on_close is not None:
        stream = closing(stream, on_close)
    return stream


def stream_headers(protocol: str | None) -> dict[str, str]:
    """The headers of a stream's `200` (SPEC 11), ours (`text/event-stream`, no cache, no proxy buffering) or the
    AI SDK's (docs/live.md), as `{name: value}`."""
    if protocol == AI_SDK:
        return dict(AI_SDK_HEADERS)
    # X-Accel-Buffering: nginx must not buffer the stream.
    return {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse_response(
    request: HttpRequest,
    turn_id: uuid.UUID,
    after: int,
    *,
    view: str,
    protocol: str | None,
    on_close: Callable[[], None] | None = None,
) -> StreamingHttpResponse:
    """`text/event-stream` of the turn's events after id `after` (`event_stream`); async under ASGI, sync
    under WSGI."""
    asgi = isinstance(request, ASGIRequest)
    stream = event_stream(turn_id, after, asgi=asgi, view=view, protocol=protocol, on_close=on_close)
    release_connection()  # the request's connection goes back to the pool before the stream starts
    # The stream process sends the stream itself once this request is over (live.handoff): no thread held.
    handed_off = asgi and hand_off(stream)
    response = StreamingHttpResponse(_no_body() if handed_off else stream, headers=stream_headers(protocol))
    if handed_off:
        response[HANDOFF_HEADER] = "1"
    return response


async def _no_body() -> AsyncIterator[bytes]:
    """The body of a response whose stream was handed off (`live.handoff`): nothing."""
    return
    yield b""  # an async generator that yields nothing


def event_id(raw: str) -> int | None:
    """A `Last-Event-ID` (or `?after=`, SPEC 11): the event id it names (ASCII digits, at most 9), else None
    (the view's 400). Never raises."""
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 9 else None


def _busy(detail: str, status: int) -> Response:
    """A JSON refusal the client may retry: `Retry-After` in seconds (docs/live.md#admission)."""
    return Response(
        {"detail": detail}, status=status, headers={"Retry-After": str(settings.LIVE_TURN_RETRY_AFTER_SECONDS)}
    )


class TurnCreateView(KeepsHttpRequest, APIView):
    """Start a turn in the caller's session and stream its events (docs/live.md).

    An unknown session id is the caller's new session (its row is written
    with the turn, once stored); another user's session is 404; a session
    with a queued or running turn is 409; a bad body is 400; past the
    throttle or the user's limit 429, past the queue's depth or with no
    model configured 503 (docs/live.md#admission).
    """

    content_negotiation_class = _AlwaysJSON
    throttle_classes = [ScopedRateThrottle]  # noqa: RUF012
    throttle_scope = "live_turns"

    @extend_schema(
        request=TurnRequestSerializer,
        parameters=[_PROTOCOL],
        responses={
            (200, "text/event-stream"): _STREAM,
            400: OpenApiResponse(description="A bad body, or an unknown `protocol`: `{field: [message]}`."),
            404: OpenApiResponse(description="Not found."),
            409: OpenApiResponse(description="The session already has a turn running."),
            429: OpenApiResponse(description="Throttled, or the caller's running turns at their limit; `Retry-After`."),
            503: OpenApiResponse(description="The queue is full (`Retry-After`), or no model is configured."),
        },
    )
    def post(self, request: Request, session_id: str):
        session_uuid = parse_uuid(session_id)
        if session_uuid is None:
            raise NotFound()
        if not isinstance(request.data, dict):
            raise ValidationError({"non_field_errors": ["Expected a JSON object with a 'message'."]})
        if "message" in request.data and not isinstance(request.data["message"], str):
            # DRF's CharField would turn 12 into "12": a message is text.
            raise ValidationError({"message": ["Expected a string."]})
        protocol = stream_protocol(request)
        body = TurnRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            turn = turn_start(
                user=request.user,
                session_id=session_uuid,
                message=body.validated_data["message"],
                prompt_version=body.validated_data["prompt_version"],
            )
        except SessionNotFoundError:
            raise NotFound() from None
        except TurnConflictError:
            return Response({"detail": "This session already has a turn running."}, status=409)
        except TurnLimitError:
            limit = settings.LIVE_TURN_MAX_PER_USER
            return _busy(f"You already have {limit} answers in progress. Wait for one to finish.", 429)
        except QueueFullError:
            return _busy("Too many questions are waiting for an answer. Please try again shortly.", 503)
        except AdmissionBusyError:
            return _busy(BUSY_DETAIL, 503)
        except QueueUnavailableError:
            return _busy("The service could not queue this question. Please try again.", 503)
        except ModelNotConfiguredError as error:
            return Response({"detail": str(error)}, status=503)
        response = sse_response(self.http_request, turn.id, 0, view="turn", protocol=protocol)
        response["X-Turn-Id"] = str(turn.id)  # what a client stop names (docs/live.md#stopping-a-turn)
        return response


class TurnEventsView(KeepsHttpRequest, APIView):
    """Replay a turn's events after `Last-Event-ID` (or `?after=`), then follow it live (docs/live.md).

    A turn that ended (`done` or `error`) and has no event after that id is
    204, so an EventSource stops reconnecting. With `?protocol=ai-sdk` the
    turn is replayed from its start, always (no 204, `Last-Event-ID` not read).
    """

    content_negotiation_class = _AlwaysJSON

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "Last-Event-ID",
                EVENT_ID,
                OpenApiParameter.HEADER,
                required=False,
                description="The id of the last event the client holds; the stream starts after it.",
            ),
            OpenApiParameter(
                "after", EVENT_ID, OpenApiParameter.QUERY, required=False, description="Same as `Last-Event-ID`."
            ),
            _PROTOCOL,
        ],
        responses={
            (200, "text/event-stream"): _STREAM,
            204: OpenApiResponse(description="The turn ended and the client holds all its events: stop."),
            400: OpenApiResponse(description="Last-Event-ID is not an event id, or an unknown `protocol`."),
            404: OpenApiResponse(description="Not found."),
            410: GONE,
            429: OpenApiResponse(description="The caller has as many streams open as allowed; `Retry-After`."),
        },
    )
    def get(self, request: Request, turn_id: str):
        turn_uuid = parse_uuid(turn_id)
        turn = owned_turn(request.user.pk, turn_uuid) if turn_uuid is not None else None
        if turn is None or turn_uuid is None:
            raise NotFound()
        protocol = stream_protocol(request)
        if turn[0] not in ACTIVE_STATUSES and turn_events_pruned(turn_uuid):
            return gone(turn[2])  # its events are past their retention (docs/live.md#retention)
        if protocol == AI_SDK:
            after = 0  # its reconnect replays the turn whole: Last-Event-ID and ?after are not read, nor refused
        else:
            read = event_id(request.headers.get("Last-Event-ID") or request.query_params.get("after") or "0")
            if read is None:
                raise ValidationError({"after": ["Last-Event-ID (or ?after=) must be a non-negative event id."]})
            after = read
        status, last_seq, _ = turn
        if protocol != AI_SDK and status not in ACTIVE_STATUSES and after >= last_seq:
            return HttpResponse(status=204)  # an EventSource stops here (docs/live.md#end-of-stream)
        limit = settings.LIVE_SSE_MAX_STREAMS_PER_USER
        give_back = STREAM_SLOTS.take(request.user.pk, limit)
        if give_back is None:
            return _busy(f"You have {limit} answer streams open. Close one and try again.", 429)
        # Given back when the stream ends, or its client leaves (the stream's own `finally`).
        return sse_response(self.http_request, turn_uuid, after, view="events", protocol=protocol, on_close=give_back)
