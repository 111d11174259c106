"""Tailing a turn's event log as SSE (docs/live.md).

`event_stream(turn_id, after, asynchronous=...)` yields SSE frames for the
events with id > `after`, then follows the turn until `done` or `error`. It
starts with `retry:` (once per stream; docs/live.md#the-wire-format). An
async generator for ASGI (no thread held while waiting), a plain generator
for WSGI (runserver, `live_server`): Django buffers whole any iterator of
the other kind. A queued turn's stream sends `turn` at once, then
keep-alives until a worker takes it. A stream holds no database connection
while it waits: each read borrows one from the pool and returns it. On
PostgreSQL a wake-up's `NOTIFY` usually carries the new events
(`live.wakeups.notify_payload`): those are sent without reading the log.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator

from asgiref.sync import sync_to_async
from django.conf import settings

from chat.models import ACTIVE_STATUSES, LiveTurn
from citations.live_events import FINAL_EVENTS
from live.log import events_after, release_connection
from live.sse import KEEPALIVE, format_retry, format_sse
from live.wakeups import ensure_listener, notifier

__all__ = ["STREAM_SLOTS", "StreamSlots", "event_stream"]


BATCH = 1000  # events read at most per query


def _poll(turn_id: uuid.UUID, after: int) -> tuple[list[tuple[int, str, str]], bool]:
    """New events, and whether the stream should end when there are none (the turn is over)."""
    try:
        rows = events_after(turn_id, after, limit=BATCH)
        if rows:
            return rows, False
        status = LiveTurn.objects.filter(pk=turn_id).values_list("status", flat=True).first()
        if status in ACTIVE_STATUSES:
            return [], False
        # The last event commits with the final status: read once more, in
        # case it landed between the two queries.
        rows = events_after(turn_id, after)
        return rows, not rows
    finally:
        release_connection()


def _wait_seconds() -> float:
    # With LISTEN (PostgreSQL) a wake-up comes at once; the timeout is only a safety net
    # (and the keep-alive's clock).
    return min(2.0, settings.LIVE_TURN_KEEPALIVE_SECONDS) if ensure_listener() else settings.LIVE_TURN_POLL_SECONDS


def _frames(rows: list[tuple[int, str, str]]) -> tuple[bytes, int, bool]:
    data = b"".join(format_sse(seq, event, text) for seq, event, text in rows)
    return data, rows[-1][0], rows[-1][1] in FINAL_EVENTS


def sync_stream(turn_id: uuid.UUID, after: int) -> Iterator[bytes]:
    """The WSGI variant: blocks a thread per stream."""
    key, idle_since, wait = str(turn_id), time.monotonic(), _wait_seconds()
    yield format_retry(settings.LIVE_SSE_RETRY_MS)
    notifier.watch(key)
    try:
        woken = False
        while True:
            seen = notifier.version(key)
            # The events the wake-up's NOTIFY carried; the log is read at the start, after a
            # wake-up that carried none, and after a wait that timed out (a turn can end with
            # its status alone, and a listener that lost its connection lost notifications).
            rows, over = (notifier.take(key, after) if woken else None), False
            if rows is None:
                rows, over = _poll(turn_id, after)
            if rows:
                data, after, final = _frames(rows)
                yield data
                if final:
                    return
                idle_since = time.monotonic()
                if len(rows) == BATCH:
                    continue  # a replay: the next rows are there already
            elif over:
                return
            elif time.monotonic() - idle_since > settings.LIVE_TURN_KEEPALIVE_SECONDS:
                yield KEEPALIVE
                idle_since = time.monotonic()
            # Read again only once woken (or at the timeout): a notification that came
            # during the read moved the version past `seen`, so this returns at once.
            woken = notifier.wait(key, seen, wait)
    finally:
        notifier.unwatch(key)


async def async_stream(turn_id: uuid.UUID, after: int) -> AsyncIterator[bytes]:
    """The ASGI variant: waits on the event loop, reads the log in a worker thread (when it must)."""
    poll = sync_to_async(_poll, thread_sensitive=False)
    key, idle_since = str(turn_id), time.monotonic()
    wait = await sync_to_async(_wait_seconds, thread_sensitive=False)()
    yield format_retry(settings.LIVE_SSE_RETRY_MS)
    notifier.watch(key)
    try:
        woken = False
        while True:
            seen = notifier.version(key)
            # The events the wake-up's NOTIFY carried; the log is read at the start, after a
            # wake-up that carried none, and after a wait that timed out (a turn can end with
            # its status alone, and a listener that lost its connection lost notifications).
            rows, over = (notifier.take(key, after) if woken else None), False
            if rows is None:
                rows, over = await poll(turn_id, after)
            if rows:
                data, after, final = _frames(rows)
                yield data
                if final:
                    return
                idle_since = time.monotonic()
                if len(rows) == BATCH:
                    continue  # a replay: the next rows are there already
            elif over:
                return
            elif time.monotonic() - idle_since > settings.LIVE_TURN_KEEPALIVE_SECONDS:
                yield KEEPALIVE
                idle_since = time.monotonic()
            # Read again only once woken (or at the timeout): a notification that came
            # during the read moved the version past `seen`, so this returns at once.
            woken = await notifier.wait_async(key, seen, wait)
    finally:
        notifier.unwatch(key)


def event_stream(turn_id: uuid.UUID, after: int, *, asynchronous: bool) -> Iterator[bytes] | AsyncIterator[bytes]:
    """SSE frames of the turn's events after id `after`, following the turn live until `done`/`error`."""
    return async_stream(turn_id, after) if asynchronous else sync_stream(turn_id, after)


class StreamSlots:
    """Each user's open event streams in this process, capped (`LIVE_SSE_MAX_STREAMS_PER_USER`,
    docs/live.md#admission): every open stream reads the log at each of its turn's events, so one
    user's thousands of reconnects would make every other user's requests wait for the pool."""

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

        return give_back


STREAM_SLOTS = StreamSlots()
