"""`live.direct.DirectOpens`: the plain case of a stream open is answered without Django's request, with the
view's answer; every other request goes to Django untouched (docs/live.md#direct-opens).

Driven through the ASGI interface in process (the plain case, each case that goes to Django), then on the
Procfile's stream process: the same open answered directly and through Django, side by side.
"""

from __future__ import annotations

import asyncio
import re
import socket
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

import live.direct
import live.stream
from citations.live_events import error_event
from live.direct import DirectOpens, response_headers
from live.log import encode
from live.models import LiveTurnEvent, LiveTurnStatus
from live.slots import STREAM_SLOTS
from live.wakeups import TurnFeeds, notify_payload
from silvia.middleware import refuse_control_characters
from tests.live_support import database_url, running_turn
from tests.procfile import Stack, embedded_env

pytestmark = pytest.mark.django_db(transaction=True)  # the checks read on the streams' own threads


@pytest.fixture(autouse=True)
def _polling(monkeypatch):
    """In process, the streams poll (as on SQLite): a `LISTEN` connection would outlive each test's loop."""
    monkeypatch.setattr(live.stream.db, "listens", lambda: False)


def _scope(path: str, headers: dict[str, str], *, method: str = "GET", query: bytes = b"") -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [(name.lower().encode("latin1"), value.encode("latin1")) for name, value in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


def _open(
    scope: dict[str, Any],
    until: bytes = b"event: turn",
    on_loop: Callable[[asyncio.AbstractEventLoop], Any] | None = None,
) -> tuple[list[str], list[dict[str, Any]]]:
    """Run `DirectOpens` on `scope` until its stream sent `until`, the client then leaving: what reached
    Django (`app`) and what was sent. `on_loop` is told the event loop it runs on."""
    reached: list[str] = []
    sent: list[dict[str, Any]] = []
    first_event = asyncio.Event()

    async def app(scope, receive, send):
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 418, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def receive():
        await first_event.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)
        if until in message.get("body", b""):
            first_event.set()

    async def main():
        if on_loop is not None:
            on_loop(asyncio.get_running_loop())
        await asyncio.wait_for(DirectOpens(app, guard=refuse_control_characters)(scope, receive, send), 10)

    asyncio.run(main())
    return reached, sent


def _plain(turn_id: uuid.UUID, token: str, **extra: str) -> dict[str, Any]:
    headers = {"Host": "127.0.0.1", "Authorization": f"Token {token}", "Last-Event-ID": "0", **extra}
    return _scope(f"/api/chat/turns/{turn_id}/events/", headers)


def test_the_plain_case_is_answered_without_django_with_the_views_headers_and_its_stream(maya):
    token = Token.objects.create(user=maya).key
    turn = running_turn(maya)
    reached, sent = _open(_plain(turn.id, token))
    assert reached == []
    start = sent[0]
    assert start["type"] == "http.response.start" and start["status"] == 200
    headers = {name.decode(): value.decode() for name, value in start["headers"]}
    assert headers["Content-Type"] == "text/event-stream; charset=utf-8"
    assert headers["Cache-Control"] == "no-cache" and headers["X-Accel-Buffering"] == "no"
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["X-Frame-Options"] == "DENY"
    body = b"".join(message.get("body", b"") for message in sent[1:])
    assert body.startswith(b"retry: 3000\n\n") and b"id: 1\nevent: turn\n" in body
    assert STREAM_SLOTS.open_streams(maya.pk) == 0  # the client left: its slot is back


def _ended_turn(user: Any) -> Any:
    """A turn that failed: its `turn` event, then its `error` event (2)."""
    turn = running_turn(user)
    error = error_event(kind="internal_error", message="It failed.")
    LiveTurnEvent.objects.create(turn=turn, seq=2, event=error.name, data=encode(error))
    type(turn).objects.filter(pk=turn.pk).update(status=LiveTurnStatus.FAILED, last_seq=2, error=error.data["error"])
    return turn


def test_an_ended_turn_is_replayed_to_its_end(maya):
    token = Token.objects.create(user=maya).key
    turn = _ended_turn(maya)
    reached, sent = _open(_plain(turn.id, token), until=b"the client stays until the end")
    assert reached == [] and sent[0]["status"] == 200
    body = b"".join(message.get("body", b"") for message in sent[1:])
    assert body.startswith(b"retry: 3000\n\nid: 1\nevent: turn\n")
    assert body.endswith(b'id: 2\nevent: error\ndata: {"error":{"type":"internal_error","message":"It failed."}}\n\n')
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert STREAM_SLOTS.open_streams(maya.pk) == 0


def test_a_stream_after_an_event_id_starts_after_it(maya, monkeypatch):
    token = Token.objects.create(user=maya).key
    turn = running_turn(maya)
    reads: list[int] = []

    def read_log(turn_id: uuid.UUID, after: int) -> Any:
        reads.append(after)
        return [], False, None

    monkeypatch.setattr(live.stream, "read_log", read_log)
    reached, sent = _open(_plain(turn.id, token, **{"Last-Event-ID": "1"}), until=b"retry:")
    assert reached == [] and sent[0]["status"] == 200
    body = b"".join(message.get("body", b"") for message in sent[1:])
    assert body == b"retry: 3000\n\n"  # event 1 was held: nothing more until the turn moves
    assert reads == []  # the open's empty page was the stream's first read


def test_an_event_notified_between_the_opens_read_and_its_stream_is_sent(maya, monkeypatch):
    # The turn's feed is followed before its first page is read: event 2, written and notified just after
    # that read (before the stream starts), reaches the stream by the feed, with no read of the log.
    token = Token.objects.create(user=maya).key
    turn = running_turn(maya)
    feeds = TurnFeeds(None)  # no LISTEN connection: the test dispatches the notification itself
    monkeypatch.setattr(live.stream.db, "listens", lambda: True)
    monkeypatch.setattr(live.stream, "turn_feeds", lambda: feeds)
    monkeypatch.setattr(live.stream, "read_log", _no_read)
    loop: list[asyncio.AbstractEventLoop] = []
    read_page = live.direct.owned_turn_events

    def read_then_notify(*args: Any, **kwargs: Any) -> Any:
        found = read_page(*args, **kwargs)
        payload = notify_payload(turn.id, [(2, "text", '{"delta":"late"}')])
        loop[0].call_soon_threadsafe(feeds.dispatch, payload)  # on the loop, before the read's answer
        return found

    monkeypatch.setattr(live.direct, "owned_turn_events", read_then_notify)
    reached, sent = _open(_plain(turn.id, token), until=b"id: 2\n", on_loop=loop.append)
    body = b"".join(message.get("body", b"") for message in sent[1:])
    assert (
        reached == []
        and b"id: 1\nevent: turn\n" in body
        and body.endswith(b'id: 2\nevent: text\ndata: {"delta":"late"}\n\n')
    )
    assert feeds.following() == 0  # unfollowed when the client left


def test_a_turn_ended_by_its_status_alone_is_replayed_and_the_stream_ends_at_once(maya, monkeypatch, settings):
    # Its last event is no `done` or `error` (its `error` event could not be written): the open read the turn
    # ended and its page reaching the last event, so the stream ends after it, waiting for no notification
    # (none comes for it) and no keep-alive.
    settings.LIVE_TURN_KEEPALIVE_SECONDS = 60
    token = Token.objects.create(user=maya).key
    turn = running_turn(maya)
    type(turn).objects.filter(pk=turn.pk).update(status=LiveTurnStatus.FAILED)
    monkeypatch.setattr(live.stream.db, "listens", lambda: True)
    monkeypatch.setattr(live.stream, "turn_feeds", lambda: TurnFeeds(None))
    reached, sent = _open(_plain(turn.id, token), until=b"the client stays until the end")
    body = b"".join(message.get("body", b"") for message in sent[1:])
    assert reached == [] and sent[0]["status"] == 200
    assert body.startswith(b"retry: 3000\n\nid: 1\nevent: turn\n") and body.count(b"id: ") == 1
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}  # the stream ended


def test_with_no_slot_free_the_open_goes_to_django_without_reading_the_page(maya, settings, monkeypatch):
    token = Token.objects.create(user=maya).key
    turn = running_turn(maya)
    settings.LIVE_SSE_MAX_STREAMS_PER_USER = 1
    pages: list[Any] = []
    monkeypatch.setattr(live.direct, "owned_turn_events", lambda *args, **kwargs: pages.append(args))
    taken = STREAM_SLOTS.take(maya.pk, 1)
    assert taken is not None
    try:
        reached, sent = _open(_plain(turn.id, token))
    finally:
        taken()
    assert reached == [f"/api/chat/turns/{turn.id}/events/"] and sent[0]["status"] == 418
    assert pages == []


def _no_read(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the log read")


def _nothing() -> None:
    """No slot to give back."""


@pytest.mark.parametrize(
    "case",
    [
        "no authorization",
        "a session cookie",
        "a token and a bad session cookie",
        "a token and a bad CSRF cookie",
        "a malformed token",
        "an unknown token",
        "an inactive user",
        "another user's turn",
        "an unknown turn",
        "a turn id that is not one",
        "an ended turn held whole",
        "an ended turn whose log was pruned",
        "a bad event id",
        "a query string",
        "a disallowed host",
        "a control character",
        "no slot free",
        "a POST",
        "another route",
    ],
)
def test_every_other_open_goes_to_django_untouched(case, maya, other_user, settings):
    token = Token.objects.create(user=maya).key
    turn = running_turn(maya)
    path = f"/api/chat/turns/{turn.id}/events/"
    headers = {"Host": "127.0.0.1", "Authorization": f"Token {token}", "Last-Event-ID": "0"}
    method, query = "GET", b""
    give_back: Callable[[], None] = _nothing
    if case == "no authorization":
        del headers["Authorization"]
    elif case == "a session cookie":
        del headers["Authorization"]
        headers["Cookie"] = "sessionid=abc"
    elif case == "a token and a bad session cookie":
        headers["Cookie"] = "sessionid=abc"  # Django deletes it
    elif case == "a token and a bad CSRF cookie":
        headers["Cookie"] = "csrftoken=abc"  # Django replaces it
    elif case == "a malformed token":
        headers["Authorization"] = "Token not-a-key"
    elif case == "an unknown token":
        headers["Authorization"] = "Token " + "0" * 40
    elif case == "an inactive user":
        get_user_model().objects.filter(pk=maya.pk).update(is_active=False)
    elif case == "another user's turn":
        headers["Authorization"] = f"Token {Token.objects.create(user=other_user).key}"
    elif case == "an unknown turn":
        path = f"/api/chat/turns/{uuid.uuid4()}/events/"
    elif case == "a turn id that is not one":
        path = "/api/chat/turns/not-a-uuid/events/"
    elif case == "an ended turn held whole":
        type(turn).objects.filter(pk=turn.pk).update(status=LiveTurnStatus.DONE)
        headers["Last-Event-ID"] = "1"
    elif case == "an ended turn whose log was pruned":
        type(turn).objects.filter(pk=turn.pk).update(status=LiveTurnStatus.DONE)
        LiveTurnEvent.objects.filter(turn=turn).delete()
    elif case == "a bad event id":
        headers["Last-Event-ID"] = "-1"
    elif case == "a query string":
        query = b"protocol=ai-sdk"
    elif case == "a disallowed host":
        headers["Host"] = "elsewhere.example"
    elif case == "a control character":
        headers["X-Note"] = "a\x01b"
    elif case == "no slot free":
        settings.LIVE_SSE_MAX_STREAMS_PER_USER = 1
        taken = STREAM_SLOTS.take(maya.pk, 1)
        assert taken is not None
        give_back = taken
    elif case == "a POST":
        method = "POST"
    elif case == "another route":
        path = f"/api/chat/turns/{turn.id}/stop/"
    try:
        reached, sent = _open(_scope(path, headers, method=method, query=query))
    finally:
        give_back()
    assert reached == [path]
    assert [message.get("status") for message in sent] == [418, None]  # Django's answer alone


@pytest.mark.parametrize(
    "setting", [("SECURE_SSL_REDIRECT", True), ("PREPEND_WWW", True), ("DISALLOWED_USER_AGENTS", [re.compile("bot")])]
)
def test_a_redirect_due_or_a_refused_user_agent_goes_to_django(setting, maya, settings):
    setattr(settings, *setting)
    turn = running_turn(maya)
    reached, _ = _open(_plain(turn.id, Token.objects.create(user=maya).key, **{"User-Agent": "a bot"}))
    assert reached == [f"/api/chat/turns/{turn.id}/events/"]


# --- the Procfile's stream process: the same open, directly and through Django --------------------------------


def _head_and_first_event(
    port: int, turn_id: uuid.UUID, token: str, until: bytes = b"event: turn"
) -> tuple[str, list[tuple[str, str]], bytes]:
    """The status line, headers in their order (but the date and server) and body of an open, read until
    `until`."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            f"GET /api/chat/turns/{turn_id}/events/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Token {token}\r\nLast-Event-ID: 0\r\n\r\n".encode()
        )
        data = b""
        while until not in data:
            chunk = sock.recv(4096)
            assert chunk, f"the stream ended before {until!r}: {data!r}"
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin1").split("\r\n")
    headers = [(name.lower(), value.strip()) for name, _, value in (line.partition(":") for line in lines)]
    return status, [(name, value) for name, value in headers if name not in ("date", "server")], body


def test_on_the_stream_process_a_direct_open_answers_as_django_does(tmp_path, maya):
    token = Token.objects.create(user=maya).key
    turn, ended = running_turn(maya), _ended_turn(maya)
    stack = Stack({"DATABASE_URL": database_url(), **embedded_env(tmp_path / "broker")}, tmp_path)
    try:
        answers = []
        for port in (stack.stream().port, stack.stream(LIVE_SSE_DIRECT_OPENS="false").port):
            answers.append(
                (
                    _head_and_first_event(port, turn.id, token),
                    _head_and_first_event(port, ended.id, token, until=b"\r\n0\r\n\r\n"),  # replayed to its end
                )
            )
    finally:
        stack.close()
    direct, through_django = answers
    assert direct[0][0] == through_django[0][0] == "HTTP/1.1 200 OK"
    assert direct == through_django


def test_response_headers_are_the_stream_headers_and_the_middlewares(rf, settings):
    settings.SECURE_HSTS_SECONDS = 3600
    request = rf.get("/api/chat/turns/x/events/", secure=True)
    headers = {name.decode(): value.decode() for name, value in response_headers(request)}
    assert headers["Strict-Transport-Security"] == "max-age=3600"
    assert headers["Content-Type"] == "text/event-stream; charset=utf-8"
