"""`live.handoff.StreamHandoff` driven directly through the ASGI interface (no server): a handed-off stream is
sent after the response's start, once the application returned; the marker never reaches the client; a client
that leaves ends and closes the stream; a response without the marker goes out as it is, and a stream handed
off to it all the same is closed unsent."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from rest_framework.authtoken.models import Token

from live.handoff import HANDOFF_HEADER, StreamHandoff, hand_off
from tests.live_support import database_url, running_turn
from tests.procfile import Stack, embedded_env

MARK = (HANDOFF_HEADER.encode(), b"1")
START = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream"), MARK]}


class Closable:
    """A stream as `live.stream.closing` wraps one: its chunks, and a `close()` (the slot's give-back)."""

    def __init__(self, chunks: list[bytes], *, wait: asyncio.Event | None = None) -> None:
        self.chunks, self.wait = chunks, wait
        self.closed = 0
        self.finished = False
        self.gen = self._run()

    async def _run(self) -> AsyncIterator[bytes]:
        try:
            for chunk in self.chunks:
                yield chunk
            if self.wait is not None:
                await self.wait.wait()  # a live turn that goes quiet
        finally:
            self.finished = True

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.gen

    def close(self) -> None:
        self.closed += 1


def app_handing_off(stream: Any, start: dict[str, Any] = START, *, during_app: list[Any] | None = None):
    async def app(scope, receive, send):
        assert hand_off(stream)
        await send(start)
        await send({"type": "http.response.body", "body": b"", "more_body": True})
        await send({"type": "http.response.body"})  # Django's final message of a streaming response
        if during_app is not None:
            during_app.append("returned")

    return app


def run(app, *, disconnect_after: float | None = None) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive():
        if disconnect_after is None:
            await asyncio.Event().wait()  # the client stays
        else:
            await asyncio.sleep(disconnect_after)
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/api/chat/turns/x/events", "headers": []}
    asyncio.run(asyncio.wait_for(StreamHandoff(app)(scope, receive, send), 10))
    return sent


def test_a_handed_off_stream_follows_the_start_without_the_marker_then_ends_closed():
    stream = Closable([b"retry: 3000\n\n", b"id: 1\nevent: turn\ndata: {}\n\n"])
    order: list[Any] = []
    sent = run(app_handing_off(stream, during_app=order))
    assert sent == [
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]},
        {"type": "http.response.body", "body": b"retry: 3000\n\n", "more_body": True},
        {"type": "http.response.body", "body": b"id: 1\nevent: turn\ndata: {}\n\n", "more_body": True},
        {"type": "http.response.body", "body": b"", "more_body": False},
    ]
    assert order == ["returned"]  # the application had returned before the stream was sent
    assert (stream.finished, stream.closed) == (True, 1)


def test_a_client_that_leaves_ends_the_stream_and_it_is_closed():
    stream = Closable([b"retry: 3000\n\n"], wait=asyncio.Event())  # then quiet for ever
    sent = run(app_handing_off(stream), disconnect_after=0.05)
    assert [message.get("body") for message in sent[1:]] == [b"retry: 3000\n\n"]  # no final message: gone
    assert (stream.finished, stream.closed) == (True, 1)


def test_a_response_without_the_marker_goes_out_as_it_is_and_a_stream_handed_off_anyway_is_closed_unsent():
    stream = Closable([b"never sent"])
    refused = {"type": "http.response.start", "status": 429, "headers": [(b"retry-after", b"1")]}

    async def app(scope, receive, send):
        assert hand_off(stream)
        await send(refused)
        await send({"type": "http.response.body", "body": b'{"detail":"busy"}', "more_body": False})

    sent = run(app)
    assert sent == [refused, {"type": "http.response.body", "body": b'{"detail":"busy"}', "more_body": False}]
    assert (stream.finished, stream.closed) == (False, 1)  # never started: its close() still ran


def test_outside_a_handoff_nothing_is_taken():
    assert hand_off(Closable([])) is False  # WSGI, the tests' client: the response streams itself


# --- the stream process (uvicorn, the Procfile's `stream:` line), a real socket per stream ------------------


def _threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:")))


def _open_following(port: int, turn_id: uuid.UUID, token: str) -> socket.socket:
    """A stream of a running turn no worker advances, its `turn` event read: it stays open (keep-alives)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(
        f"GET /api/chat/turns/{turn_id}/events/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Token {token}\r\nLast-Event-ID: 0\r\n\r\n".encode()
    )
    head = b""
    while b"event: turn" not in head:
        chunk = sock.recv(4096)
        assert chunk, f"the stream ended before its first event: {head!r}"
        head += chunk
    assert head.startswith(b"HTTP/1.1 200") and HANDOFF_HEADER.lower().encode() not in head.lower(), head
    return sock


@pytest.mark.django_db(transaction=True)
def test_streams_open_on_the_stream_process_hold_no_thread_each(tmp_path, maya):
    """Django keeps a thread per ASGI request until its response's last byte: without the handoff, 20 open
    streams would be 20 more threads in the process."""
    stack = Stack({"DATABASE_URL": database_url(), **embedded_env(tmp_path / "broker")}, tmp_path)
    held: list[socket.socket] = []
    try:
        # One log reader thread, so the reads add no thread either.
        stream = stack.stream(LIVE_SSE_MAX_STREAMS_PER_USER="50", LIVE_SSE_READ_THREADS="1")
        token = Token.objects.create(user=maya).key
        turn = running_turn(maya)
        held.append(_open_following(stream.port, turn.id, token))  # the first: the reader's thread, the listener
        pid = stream.process.pid
        deadline = time.monotonic() + 10
        while (before := _threads(pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
            if _threads(pid) == before:
                break  # settled: the first request's thread is gone
        held += [_open_following(stream.port, turn.id, token) for _ in range(20)]
        deadline = time.monotonic() + 10
        while (now := _threads(pid)) > before + 2 and time.monotonic() < deadline:
            time.sleep(0.2)  # the last requests' threads end as their requests do
        assert now <= before + 2, f"{now} threads with 21 streams open, {before} with one"
    finally:
        for sock in held:
            sock.close()
        stack.close()
