"""Opening a turn's event stream without Django's request, in the plain case (the stream process;
docs/live.md#direct-opens).

A stream open through Django's request costs the stream process about as much
again as the open itself (the middleware chain, DRF, a thread made and joined
per request: bench/README.md#third-pass-stop-44-uvicorns-c-parts-and-what-a-stream-open-costs),
and a burst of reconnects (a deploy, a network blip) is a burst of opens.
`DirectOpens`, an ASGI middleware in front of Django's handler, answers the
plain case itself with the view's own answer, and hands every other request
to Django untouched. The plain case is a `GET` of the events route
(`live.urls`' `turn-events`) that:

- has no query string (so no `?protocol=` and no `?after=`: `Last-Event-ID`
  only, an event id by `live.views.event_id`) and no cookie (the session and
  CSRF middleware answer cookies: a browser's opens are Django's);
- carries `Authorization: Token <key>` that `chat.api.authentication.TokenAuthentication`
  accepts (DRF's first authenticator: the same statement, the same user);
- passes what the middleware chain checks before a view: the guard the
  application passes in (`silvia.middleware.refuse_control_characters`: no
  control character), a `Host` that
  `ALLOWED_HOSTS` allows (`HttpRequest.get_host`), no redirect due and no
  user agent refused (`SecurityMiddleware` and `CommonMiddleware` asked);
- names a turn of that user that is queued or running, or has ended with
  events after `Last-Event-ID` still kept (the view's 204 and 410 are the
  view's): one statement reads the turn and the first page of its log
  (`live.log.owned_turn_events`), and that page is the stream's first read;
- finds a stream slot free for the user (`LIVE_SSE_MAX_STREAMS_PER_USER`).

Its response is the view's: `200`, `live.views.stream_headers`, then the
headers DRF's view and the security middleware add (`Allow`, `Vary`,
`X-Content-Type-Options`, `Referrer-Policy`, `Cross-Origin-Opener-Policy`,
`X-Frame-Options`, HSTS when due: computed by the same classes), and the same
stream (`live.views.event_stream`), sent on the event loop, the turn's feed followed before its first page is
read (`live.stream.follow`: nothing notified meanwhile is missed). Anything else (a
session cookie, an ended turn held whole, another user's turn, a full set of slots, a
database that fails the check) goes to Django, which answers it as before
(`tests/live/test_direct.py` holds each case and the two answers side by
side). The checks run on the streams' read threads (`live.stream.read_executor`):
an open costs no thread of its own. `LIVE_SSE_DIRECT_OPENS=false` sends every
open through Django.
"""

from __future__ import annotations

import functools
import io
import logging
import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import DisallowedHost, PermissionDenied
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware
from django.middleware.security import SecurityMiddleware
from django.urls import Resolver404, resolve
from rest_framework.exceptions import AuthenticationFailed

from chat.api.authentication import TokenAuthentication
from citations.uuids import parse_uuid
from live.handoff import send_stream
from live.log import owned_turn_events, release_connection
from live.models import ACTIVE_STATUSES
from live.slots import STREAM_SLOTS
from live.stream import BATCH, Opened, Row, follow, read_executor, unfollow
from live.views import TurnEventsView, event_id, event_stream, stream_headers

__all__ = ["DirectOpens", "plain_open"]

logger = logging.getLogger(__name__)


Guard = Callable[[HttpRequest], HttpResponse | None]


def plain_open(request: ASGIRequest, turn_id: uuid.UUID, guard: Guard) -> tuple[Any, int, list[Row], bool] | None:
    """`(user id, after, rows, ended)` when `request` (a `GET` of the events route for `turn_id`) is the plain
    case the module names, `guard` (what the middleware chain answers before any view, or None) letting it
    through, `rows` the log's first page after `after` (`live.log.owned_turn_events`), `ended` whether the turn
    had ended and `rows` reach its last event (`live.stream.Opened`); else None (Django answers it).
    Two statements on PostgreSQL (the token's, the turn's with its page; three elsewhere), on the calling
    thread's pooled connection, given back before it returns. Never raises: a check that fails is Django's to answer."""
    try:
        after = event_id(request.headers.get("Last-Event-ID") or "0")
        if after is None or guard(request) is not None:
            return None
        request.get_host()  # DisallowedHost: Django's 400
        if _security().process_request(request) is not None or _common().process_request(request) is not None:
            return None  # the HTTPS redirect, the `www.` one (PermissionDenied: a user agent refused)
        authenticated = TokenAuthentication().authenticate(request)  # type: ignore[arg-type]  # reads META only
        if authenticated is None:
            return None  # no token: a session, or anonymous
        user = authenticated[0]
        if STREAM_SLOTS.open_streams(user.pk) >= settings.LIVE_SSE_MAX_STREAMS_PER_USER:
            return None  # the view's 429, with no page read (the slot is taken on the event loop after)
        found = owned_turn_events(user.pk, turn_id, after, limit=BATCH)
        if found is None:
            return None  # the view's 404
        (status, last_seq, _), rows = found
        if status not in ACTIVE_STATUSES and not rows:
            return None  # an ended turn the client holds whole (the view's 204), or its log pruned (410)
        return user.pk, after, rows, status not in ACTIVE_STATUSES and rows[-1][0] >= last_seq
    except (AuthenticationFailed, DisallowedHost, PermissionDenied):
        return None
    except Exception as error:  # the database, say: Django answers (its 503)
        logger.warning("a direct stream open went to Django after %s", type(error).__name__)
        return None
    finally:
        release_connection()


def response_headers(request: ASGIRequest) -> list[tuple[bytes, bytes]]:
    """The headers of the view's `200` for our events (SPEC 11; `stream_headers`), with what DRF's view and the
    security middleware add to it, computed by those classes, as ASGI `(name, value)` byte pairs."""
    response = HttpResponse(headers=stream_headers(None))
    view = TurnEventsView()
    view.setup(request)  # as Django's `as_view` does: a GET view answers HEAD too (DRF's `Allow`)
    for name, value in view.default_response_headers.items():
        response[name] = value
    # In the order Django runs them on a response: the inner middleware first (settings.MIDDLEWARE).
    _frame_options().process_response(request, response)
    _security().process_response(request, response)
    return [(name.encode("latin1"), value.encode("latin1")) for name, value in response.items()]


def _unused(request: Any) -> HttpResponse:  # the middlewares' `get_response`, never called here
    raise AssertionError("not called")


def _security() -> SecurityMiddleware:
    return SecurityMiddleware(_unused)  # made per request: it reads its settings when made


def _common() -> CommonMiddleware:
    return CommonMiddleware(_unused)


def _frame_options() -> XFrameOptionsMiddleware:
    return XFrameOptionsMiddleware(_unused)


@functools.cache
def _async_plain_open() -> Any:
    """`plain_open` on the streams' read threads, as a coroutine function (made once a process)."""
    return sync_to_async(plain_open, thread_sensitive=False, executor=read_executor())


class DirectOpens:
    """An ASGI middleware in front of Django's handler: answers the plain case of a stream open itself
    (see the module; SPEC 11's answer), hands every other request to `app` untouched. `guard`: what the
    application's own middleware answers a request before any view, or None to let it on
    (`silvia.middleware.refuse_control_characters`)."""

    def __init__(self, app: Any, *, guard: Guard) -> None:
        self.app, self.guard = app, guard

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        turn_id = _events_route(scope)
        if turn_id is None:
            await self.app(scope, receive, send)
            return
        request = ASGIRequest(scope, io.BytesIO())
        feed = follow(turn_id)  # before the first page is read: nothing notified meanwhile is missed
        try:
            opened = await _async_plain_open()(request, turn_id, self.guard)
            give_back = None if opened is None else STREAM_SLOTS.take(opened[0], settings.LIVE_SSE_MAX_STREAMS_PER_USER)
        except BaseException:
            unfollow(turn_id, feed)
            raise
        if opened is None or give_back is None:
            unfollow(turn_id, feed)
            await self.app(scope, receive, send)  # Django's answer (a full set of slots: its 429)
            return
        taken = give_back

        def close() -> None:  # safe to call twice, as the stream's end calls it too
            taken()
            unfollow(turn_id, feed)

        stream = event_stream(
            turn_id,
            opened[1],
            asgi=True,
            view="events",
            protocol=None,
            on_close=close,
            opened=Opened(feed, opened[2], opened[3]),
        )
        try:
            await send({"type": "http.response.start", "status": 200, "headers": response_headers(request)})
        except BaseException:
            close()  # the client left before the start: the stream never starts
            raise
        await send_stream(stream, receive, send)


def _events_route(scope: dict[str, Any]) -> uuid.UUID | None:
    """The turn id of a `GET` of the events route with no query string and no cookie, else None (a cookie's
    answer is Django's middleware's: a session read or deleted, a CSRF cookie replaced; a turn id that is no
    UUID, the view's 404). Reads no database."""
    if scope["type"] != "http" or scope.get("method") != "GET" or scope.get("query_string"):
        return None
    if any(name == b"cookie" for name, _ in scope["headers"]):
        return None
    try:
        match = resolve(scope["path"])
    except Resolver404:
        return None
    return parse_uuid(match.kwargs.get("turn_id", "")) if match.url_name == "turn-events" else None
