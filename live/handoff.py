"""Sending a turn's event stream after Django's request is over (the stream process; docs/live.md#the-stream-process).

Django's ASGI handler runs each request inside one asgiref
`ThreadSensitiveContext`: the request's sync code (the middleware chain,
the DRF view) runs on a thread of that context, and the thread lives until
the response's last byte is sent. A response that streams for minutes would
hold an idle thread (and its stack) that long, and every chunk would go
through the handler's response loop.

So `StreamHandoff`, an ASGI middleware right around Django's handler, takes
a stream over the way a proxy takes an `X-Accel-Redirect`: under it,
`live.views.sse_response` gives the stream to `hand_off` and returns a
streaming response with no body, marked with the `HANDOFF_HEADER` header.
Django sends that response's start (its status and every header its
middleware set) and ends the request: its thread ends, its connection goes
back to the pool. The middleware sends that start without the marker, then
the stream itself, on the event loop, until the stream ends or the client
leaves (`http.disconnect`); it closes the stream either way (its own
`finally` and its `close()`: the slot's give-back, the open-streams gauge).

A response without the marker (an error, a 204, any other route) goes out as
Django sends it, and a stream handed off to it all the same is closed unsent.
Where no `StreamHandoff` runs (WSGI, the tests' client), `hand_off` says so
and the response streams itself, as before.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import AsyncIterable
from typing import Any

__all__ = ["HANDOFF_HEADER", "StreamHandoff", "hand_off", "send_stream"]

logger = logging.getLogger(__name__)

#: The header a response carries when its body was handed off (never sent to a client).
HANDOFF_HEADER = "X-Silvia-Stream-Handoff"
_HANDOFF = HANDOFF_HEADER.lower().encode("latin1")

#: The streams the view of this request handed off (set by `StreamHandoff` for each request).
_handed: contextvars.ContextVar[list[AsyncIterable[bytes]] | None] = contextvars.ContextVar(
    "live_stream_handoff", default=None
)


def hand_off(stream: AsyncIterable[bytes]) -> bool:
    """Give `stream` (an async iterable of SSE bytes, SPEC 11) to this request's `StreamHandoff` to send after
    the response's start; False when none runs (WSGI, the tests' client: the response streams it itself).
    The caller then marks its response with `HANDOFF_HEADER` and gives it no body. Never raises."""
    handed = _handed.get()
    if handed is None:
        return False
    handed.append(stream)
    return True


class StreamHandoff:
    """An ASGI middleware around Django's handler: sends the streams its views hand off (SPEC 11; see the
    module). Only `GET` and `POST` hand off; any other request passes through untouched."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") not in ("GET", "POST"):
            await self.app(scope, receive, send)
            return
        handed: list[AsyncIterable[bytes]] = []
        started: dict[str, Any] | None = None  # a marked start, held until the request is over
        reset = _handed.set(handed)

        async def send_unless_handed_off(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                headers = message.get("headers", [])
                if handed and any(name.lower() == _HANDOFF for name, _ in headers):
                    kept = [(name, value) for name, value in headers if name.lower() != _HANDOFF]
                    started = {**message, "headers": kept}
                    await send(started)
                    return
            elif started is not None:
                return  # the empty body of a response whose stream was handed off: the stream follows
            await send(message)

        try:
            await self.app(scope, receive, send_unless_handed_off)
        finally:
            _handed.reset(reset)
            stream = handed[0] if handed and started is not None else None
            for other in handed:
                if other is not stream:
                    await _close(other)
        if stream is not None:
            await send_stream(stream, receive, send)


async def send_stream(stream: AsyncIterable[bytes], receive: Any, send: Any) -> None:
    """Send `stream` (SSE bytes, SPEC 11) as an ASGI response's body, its start sent already, until it ends or
    the client leaves (`http.disconnect`); then close it (`aclose`, then its `close()`)."""
    chunks = aiter(stream)

    async def pump() -> None:
        async for chunk in chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def until_disconnect() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    pumping = asyncio.ensure_future(pump())
    listening = asyncio.ensure_future(until_disconnect())
    try:
        await asyncio.wait({pumping, listening}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (pumping, listening):
            task.cancel()
        for outcome in await asyncio.gather(pumping, listening, return_exceptions=True):
            if isinstance(outcome, Exception):  # a stream never raises (live.stream); a send might
                logger.warning("a handed-off stream ended on %s", type(outcome).__name__)
        await _close(stream)


async def _close(stream: AsyncIterable[bytes]) -> None:
    """End a stream: its generator's `finally` (`aclose`: a no-op once it ended), then the `close()` of
    `live.stream.closing`'s wrapper (the slot's give-back, safe to call twice)."""
    chunks = aiter(stream)
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        await aclose()
    close = getattr(stream, "close", None)
    if close is not None:
        close()
