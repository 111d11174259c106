"""Tailing a turn's event log as SSE (docs/live.md).

`event_stream(turn_id, after, asynchronous=...)` yields SSE frames for the
events with id > `after`, then follows the turn until `done` or `error`. It
starts with `retry:` (once per stream; docs/live.md#the-wire-format). An
async generator for ASGI (no thread held while waiting), a plain generator
for WSGI (runserver, `live_server`): Django buffers whole any iterator of
the other kind. A running turn whose worker stopped beating is resumed here
(reconnect), by whichever process serves the stream.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.conf import settings

from chat.live.events import events_after, format_retry, format_sse, notifier
from chat.live.listener import ensure_listener
from chat.live.service import start_worker, turn_claim_stale
from chat.models import LiveTurn, LiveTurnStatus
from citations.live_events import FINAL_EVENTS

__all__ = ["event_stream"]

KEEPALIVE_SECONDS = 15.0
KEEPALIVE = b": keep-alive\n\n"


def _poll(turn_id: uuid.UUID, after: int) -> tuple[list[tuple[int, str, str]], bool]:
    """New events, and whether the stream should end when there are none (the turn is over)."""
    # The thread's connection stays open between polls (a stream polls often);
    # WSGI closes it when the response ends, ASGI's pool threads keep theirs.
    rows = events_after(turn_id, after)
    if rows:
        return rows, False
    status = LiveTurn.objects.filter(pk=turn_id).values_list("status", flat=True).first()
    if status != LiveTurnStatus.RUNNING:
        # The last event commits with the final status: read once more, in
        # case it landed between the two queries.
        rows = events_after(turn_id, after)
        return rows, not rows
    if status == LiveTurnStatus.RUNNING:
        for claimed_id, token in turn_claim_stale(turn_id=turn_id):
            start_worker(claimed_id, token)
        return [], False
    return [], True


def _wait_seconds() -> float:
    # With LISTEN (PostgreSQL) a wake-up comes at once; the timeout is only a safety net.
    return 2.0 if ensure_listener() else settings.LIVE_TURN_POLL_SECONDS


def _frames(rows: list[tuple[int, str, str]]) -> tuple[bytes, int, bool]:
    data = b"".join(format_sse(seq, event, text) for seq, event, text in rows)
    return data, rows[-1][0], rows[-1][1] in FINAL_EVENTS


def sync_stream(turn_id: uuid.UUID, after: int) -> Iterator[bytes]:
    """The WSGI variant: blocks a thread per stream."""
    key, idle_since, wait = str(turn_id), time.monotonic(), _wait_seconds()
    yield format_retry(settings.LIVE_SSE_RETRY_MS)
    while True:
        seen = notifier.version(key)
        rows, over = _poll(turn_id, after)
        if rows:
            data, after, final = _frames(rows)
            yield data
            if final:
                return
            idle_since = time.monotonic()
            continue
        if over:
            return
        if time.monotonic() - idle_since > KEEPALIVE_SECONDS:
            yield KEEPALIVE
            idle_since = time.monotonic()
        notifier.wait(key, seen, wait)


async def async_stream(turn_id: uuid.UUID, after: int) -> AsyncIterator[bytes]:
    """The ASGI variant: waits on the event loop, reads the log in a worker thread."""
    poll = sync_to_async(_poll, thread_sensitive=False)
    key, idle_since = str(turn_id), time.monotonic()
    wait = await sync_to_async(_wait_seconds, thread_sensitive=False)()
    yield format_retry(settings.LIVE_SSE_RETRY_MS)
    while True:
        seen = notifier.version(key)
        rows, over = await poll(turn_id, after)
        if rows:
            data, after, final = _frames(rows)
            yield data
            if final:
                return
            idle_since = time.monotonic()
            continue
        if over:
            return
        if time.monotonic() - idle_since > KEEPALIVE_SECONDS:
            yield KEEPALIVE
            idle_since = time.monotonic()
        await notifier.wait_async(key, seen, wait)


def event_stream(turn_id: uuid.UUID, after: int, *, asynchronous: bool) -> Iterator[bytes] | AsyncIterator[bytes]:
    """SSE frames of the turn's events after id `after`, following the turn live until `done`/`error`."""
    return async_stream(turn_id, after) if asynchronous else sync_stream(turn_id, after)
