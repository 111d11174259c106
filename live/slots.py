"""Each user's open event streams in this process, capped (docs/live.md#admission), and the ASGI middleware
that gives back the slots of a request whose response was never closed."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["STREAM_SLOTS", "GiveBackSlots", "StreamSlots"]

#: The give-backs of the slots taken while serving this ASGI request (`GiveBackSlots`); None elsewhere.
_taken_by_request: contextvars.ContextVar[list[Callable[[], None]] | None] = contextvars.ContextVar(
    "live_stream_slots_taken", default=None
)


class StreamSlots:
    """Each user's open event streams in this process, capped (`LIVE_SSE_MAX_STREAMS_PER_USER`,
    docs/live.md#admission): one user's thousands of reconnects would make every other user's streams
    wait for the log's reads."""

    def __init__(self) -> None:
        self._open: dict[object, int] = {}
        self._lock = threading.Lock()

    def take(self, user_id: object, limit: int) -> Callable[[], None] | None:
        """One more stream for `user_id`: the function that gives its slot back (once; later calls do
        nothing), or None when the user already has `limit` open."""
        with self._lock:
            if self._open.get(user_id, 0) >= limit:
                return None
            self._open[user_id] = self._open.get(user_id, 0) + 1
        given_back = False

        def give_back() -> None:
            nonlocal given_back
            with self._lock:
                if given_back:
                    return
                given_back = True
                left = self._open[user_id] - 1
                if left:
                    self._open[user_id] = left
                else:
                    del self._open[user_id]

        taken = _taken_by_request.get()
        if taken is not None:
            taken.append(give_back)
        return give_back

    def open_streams(self, user_id: object) -> int:
        with self._lock:
            return self._open.get(user_id, 0)


STREAM_SLOTS = StreamSlots()


class GiveBackSlots:
    """An ASGI middleware: the stream slots a request took are given back when its ASGI call ends.

    The response's `close()` gives a slot back, but a client that leaves while its view still runs
    (before the headers) makes Django's handler cancel the request and drop the response the view then
    returns, never closed: without this its slot would stay taken until the process restarts. Django's
    handler returns only once the view's thread is done (asgiref's `ThreadSensitiveContext` joins it),
    and a stream it served has ended by then, so every slot of the request is free to give back
    (a give-back runs once: the response's own is a no-op after it).
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        taken: list[Callable[[], None]] = []
        reset = _taken_by_request.set(taken)
        try:
            await self.app(scope, receive, send)
        finally:
            _taken_by_request.reset(reset)
            for give_back in taken:
                give_back()
