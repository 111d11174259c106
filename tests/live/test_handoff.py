"""`live.handoff.StreamHandoff` driven directly through the ASGI interface (no server): a handed-off stream is
sent after the response's start, once the application returned; the marker never reaches the client; a client
that leaves ends and closes the stream; a response without the marker goes out as it is, and a stream handed
off to it all the same is closed unsent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from live.handoff import HANDOFF_HEADER, StreamHandoff, hand_off

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
