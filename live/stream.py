"""Serving a turn's event log as a stream (docs/live.md): one loop, for our events and the AI SDK's, sync and async.

`tail_steps` is the loop, sans-IO (as h11 is): a generator that yields what
to do next, bytes to send, `Read(after)` (the log's rows after that id) or
`Wait(seconds)` (for a wake-up), and is sent each answer. Its two drivers are
ten lines each:

- `async_stream` (ASGI: the stream process, `make run`) waits on the turn's
  feed (`live.wakeups`: a coroutine and a queue; no thread, no database
  connection), and reads the log on `LIVE_SSE_READ_THREADS` threads of its
  own (`read_executor`; a read waits for a thread holding nothing, then
  borrows a pooled connection and gives it back), a page at a time, only at
  the start, when a wake-up names no events (or a gap) and after a quiet
  `LIVE_TURN_KEEPALIVE_SECONDS`; on SQLite it polls every
  `LIVE_TURN_POLL_SECONDS`;
- `sync_stream` (WSGI: a stream that reached the web process, the tests'
  live server) polls, holding its thread.

A queued turn's stream sends what its log holds (`turn`) at once, then
keep-alives until a worker takes it. The stream ends after `done` or `error`,
or when the turn ended by its status alone (`turn_fail` without an event).
A stream never raises. A failed read (the pool's timeout, the database
gone a moment) is tried again, `LIVE_SSE_READ_RETRIES` times, backing off
(`read_backoff_seconds`) with a keep-alive each time; past them the stream
ends, having told an EventSource to reconnect (`retry:`), and is logged by
class. The server always closes it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings

from citations.ai_sdk import DONE_FRAME, PROTOCOL, UIMessageStream, format_chunk
from citations.live_events import FINAL_EVENTS, LOG_ONLY_EVENTS, EventName
from live import db
from live.log import events_after, release_connection
from live.models import ACTIVE_STATUSES, LiveTurn
from live.slots import STREAM_SLOTS, StreamSlots
from live.sse import KEEPALIVE, format_retry, format_sse
from live.stops import STOPPED, STOPPED_MESSAGE
from live.wakeups import Feed, turn_feeds

__all__ = [
    "BATCH",
    "STREAM_SLOTS",
    "Opened",
    "Read",
    "StreamSlots",
    "Wait",
    "async_stream",
    "closing",
    "follow",
    "read_backoff_seconds",
    "read_executor",
    "sync_stream",
    "tail_steps",
    "unfollow",
]

logger = logging.getLogger(__name__)

BATCH = 1000  # events read at most per query

Row = tuple[int, str, str]

#: The `error` a stream ends with when its turn's rows are gone while it reads (a session deleted during its
#: turn is stopped first, SPEC 16; erased): the stop's own, whichever event the stream had read last.
VANISHED: dict[str, str] = {"type": STOPPED, "message": STOPPED_MESSAGE}


@dataclass(frozen=True, slots=True)
class Read:
    """Read the log after event id `after`: answer `(rows, ended, error)` (`read_log`)."""

    after: int


@dataclass(frozen=True, slots=True)
class Wait:
    """Wait up to `seconds` for a wake-up: answer its rows (a notification's events), None (read the
    log) or `TIMED_OUT`."""

    seconds: float


TIMED_OUT = object()


def read_log(turn_id: uuid.UUID, after: int) -> tuple[list[Row], bool, Any]:
    """A page of the turn's events after `after`; whether the turn is over with no more events (its
    last event commits with its final status, so a turn that ended is read once more), and then its
    stored `error` (a turn failed by its status alone has no `error` event)."""
    try:
        rows = events_after(turn_id, after, limit=BATCH)
        if rows:
            return rows, False, None
        status = LiveTurn.objects.filter(pk=turn_id).values_list("status", "error").first()
        if status is None and not events_after(turn_id, after, limit=1):
            return [], True, VANISHED  # its session was deleted (stopped first), or it was erased
        if status is not None and status[0] in ACTIVE_STATUSES:
            return [], False, None
        rows = events_after(turn_id, after, limit=BATCH)
        return rows, not rows, status[1] if status is not None and not rows else None
    finally:
        release_connection()


class Tail:
    """What one stream has sent: the frames for the next rows of the log, ours or the AI SDK's."""

    def __init__(self, after: int, protocol: str | None) -> None:
        self.after = after
        self.ui = UIMessageStream() if protocol == PROTOCOL else None
        self.over = False

    def opening(self) -> bytes:
        return b"" if self.ui is not None else format_retry(settings.LIVE_SSE_RETRY_MS)

    def frames(self, rows: list[Row], *, more: bool = False) -> bytes:
        """The frames of the rows after `after` (`more`: the next page follows at once)."""
        rows = [row for row in rows if row[0] > self.after]
        if not rows:
            return b""
        self.after = rows[-1][0]
        if self.ui is None:
            self.over = rows[-1][1] in FINAL_EVENTS
            return b"".join(format_sse(seq, event, data) for seq, event, data in rows if event not in LOG_ONLY_EVENTS)
        chunks = self.ui.feed([(seq, event, orjson.loads(data)) for seq, event, data in rows], hold=more)
        return self._ui_frames(chunks)

    def ended(self, error: Any) -> bytes:
        """The turn ended by its status alone: the AI SDK stream still gets its error, then `[DONE]`. A turn
        whose rows are gone (`VANISHED`) ends ours with that `error` event too."""
        self.over = True
        if self.ui is None and error is VANISHED:
            return format_sse(self.after + 1, EventName.ERROR, orjson.dumps({"error": error}).decode())
        if self.ui is None or self.ui.ended:
            return b""
        data = {"error": error if isinstance(error, dict) else {"type": "internal_error", "message": ""}}
        return self._ui_frames(self.ui.feed([(self.after + 1, EventName.ERROR, data)]))

    def _ui_frames(self, chunks: list[Any]) -> bytes:
        assert self.ui is not None
        data = b"".join(format_chunk(chunk) for chunk in chunks)
        if self.ui.ended:
            self.over = True
            data += DONE_FRAME
        return data


def tail_steps(after: int, protocol: str | None, *, woken: bool) -> Generator[bytes | Read | Wait, Any, None]:
    """The stream of a turn's events after `after` (see the module docstring); `woken`: a wake-up comes
    with each notification (else the loop polls)."""
    tail = Tail(after, protocol)
    opening = tail.opening()
    if opening:
        yield opening
    keepalive, poll = settings.LIVE_TURN_KEEPALIVE_SECONDS, settings.LIVE_TURN_POLL_SECONDS
    read, idle_since = True, time.monotonic()
    while True:
        if read:
            rows, ended, error = yield Read(tail.after)
            data = tail.frames(rows, more=len(rows) == BATCH) + (tail.ended(error) if ended else b"")
            if data:
                yield data
                idle_since = time.monotonic()
            if tail.over:
                return
            if len(rows) == BATCH:
                continue  # a replay: the next page is there already
        quiet = time.monotonic() - idle_since
        woke = yield Wait(max(0.0, keepalive - quiet) if woken else min(poll, max(0.0, keepalive - quiet)))
        if woke is TIMED_OUT:
            read = True  # the poll, or (woken) the safety net: a notification may have been missed
            if time.monotonic() - idle_since >= keepalive:
                yield KEEPALIVE
                idle_since = time.monotonic()
            continue
        rows = woke or []
        read = not rows or rows[0][0] > tail.after + 1  # none carried, or a gap: the log has them
        if not read:
            data = tail.frames(rows)
            if data:
                yield data
                idle_since = time.monotonic()
            if tail.over:
                return


_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def read_executor() -> ThreadPoolExecutor:
    """This process's threads for the streams' log reads, `LIVE_SSE_READ_THREADS` of them (made on first use).

    Their own, not the event loop's default executor (a few threads shared with whatever else uses it): a
    read waits in this executor's queue holding nothing, and a thread borrows a pooled connection only
    while it reads, so the pool needs `LIVE_SSE_READ_THREADS` for the reads beside the admissions'
    (docs/deploying.md#database-connections)."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(settings.LIVE_SSE_READ_THREADS, thread_name_prefix="live-stream-read")
        return _executor


@functools.cache
def _async_read_log() -> Callable[[uuid.UUID, int], Awaitable[Any]]:
    """`read_log` on `read_executor`'s threads, as a coroutine function: one for the process (made once, not
    per stream)."""
    # `read_log` looked up at each call (the tests replace it).
    return sync_to_async(
        lambda turn_id, after: read_log(turn_id, after), thread_sensitive=False, executor=read_executor()
    )


def read_backoff_seconds(failures: int) -> float:
    """How long a stream waits before it reads the log again after `failures` (1, 2, ...) failed reads in a
    row: 0.25 s, doubling, at most 4 s (0.25, 0.5, 1, 2, 4, 4, ...)."""
    return min(4.0, 0.25 * 2 ** (failures - 1))


@dataclass(frozen=True)
class Opened:
    """A stream's start made before the stream (a direct open's, `live.direct`): its turn's feed, followed
    before `rows` were read (`follow`), and `rows`, the log's first page after the stream's `after` (the
    stream's first read, empty or not: whatever is written after it comes by the feed, or by the polls).
    `ended`: the turn had ended when `rows` were read and they reach its last event, so the stream ends after
    them even when its last event is no `done` or `error` (a turn ended by its status alone: for our events,
    which send no stored error; the AI SDK's would get a generic one)."""

    feed: Feed | None
    rows: list[Row]
    ended: bool = False


def follow(turn_id: uuid.UUID) -> Feed | None:
    """The turn's feed on this event loop (`live.wakeups`: a queue of the notified events' `(seq, event, data)`
    rows, or None for "read the log"; SPEC 11), followed from now on; None where nothing notifies (SQLite:
    the stream polls). `unfollow` it, or hand it to `async_stream` in an `Opened`. Never raises."""
    return turn_feeds().follow(turn_id) if db.listens() else None


def unfollow(turn_id: uuid.UUID, feed: Feed | None) -> None:
    """Stop feeding `feed` (`follow`'s; None: nothing to do). Safe to call twice; never raises."""
    if feed is not None:
        turn_feeds().unfollow(turn_id, feed)


async def async_stream(
    turn_id: uuid.UUID,
    after: int,
    *,
    protocol: str | None = None,
    on_close: Callable[[], None] | None = None,
    opened: Opened | None = None,
) -> AsyncIterator[bytes]:
    """The stream on the event loop (see the module docstring); `on_close` is called once it ends. `opened`:
    its feed and first read, made already (its first page answers the first `Read`)."""
    feed = opened.feed if opened is not None else follow(turn_id)
    first = (opened.rows, opened.ended, None) if opened is not None else None
    read = _async_read_log()
    steps, answer = tail_steps(after, protocol, woken=feed is not None), None  # type: tuple[Any, Any]
    failures = 0
    try:
        while (step := steps.send(answer)) is not None:
            if isinstance(step, bytes):
                answer = None
                yield step
            elif isinstance(step, Read):
                if first is not None:
                    answer, first = first, None
                    continue
                while True:
                    try:
                        answer = await read(turn_id, step.after)
                        failures = 0
                        break
                    except Exception as error:  # the pool's timeout, a connection lost: read again
                        failures += 1
                        if failures > settings.LIVE_SSE_READ_RETRIES:
                            raise
                        logger.warning(
                            "turn %s: a read of its log failed (%s); reading again", turn_id, type(error).__name__
                        )
                        yield KEEPALIVE
                        await asyncio.sleep(read_backoff_seconds(failures))
            else:
                answer = await _woken(feed, step.seconds)
    except StopIteration:
        return
    except Exception as error:  # reads kept failing: end the stream, telling an EventSource to reconnect
        logger.warning("turn %s: its stream ended on %s", turn_id, type(error).__name__)
        if protocol != PROTOCOL:
            yield format_retry(settings.LIVE_SSE_RETRY_MS)
    finally:
        unfollow(turn_id, feed)
        if on_close is not None:
            on_close()


async def _woken(feed: Feed | None, seconds: float) -> Any:
    """What the feed carried within `seconds`, else `TIMED_OUT`. A cancellation (the client left) always
    propagates: `asyncio.timeout`, not Python 3.11's `asyncio.wait_for`, which returns the item instead when
    it arrives in the same turn of the loop as the cancellation (the stream ran on, its slot held)."""
    if feed is None:
        await asyncio.sleep(seconds)
        return TIMED_OUT
    try:
        async with asyncio.timeout(seconds):
            return await feed.get()
    except TimeoutError:
        return TIMED_OUT


def sync_stream(
    turn_id: uuid.UUID, after: int, *, protocol: str | None = None, on_close: Callable[[], None] | None = None
) -> Iterator[bytes]:
    """The stream in a thread, polling (see the module docstring); `on_close` is called once it ends."""
    steps, answer = tail_steps(after, protocol, woken=False), None  # type: tuple[Any, Any]
    try:
        while (step := steps.send(answer)) is not None:
            if isinstance(step, bytes):
                answer = None
                yield step
            elif isinstance(step, Read):
                answer = read_log(turn_id, step.after)
            else:
                time.sleep(step.seconds)
                answer = TIMED_OUT
    except StopIteration:
        return
    except Exception as error:
        logger.warning("turn %s: its stream ended on %s", turn_id, type(error).__name__)
    finally:
        if on_close is not None:
            on_close()


class _SyncClosing:
    """`stream`, with a `close()` that Django calls when it closes the response: `on_close` then runs even
    for a stream that was never iterated (its generator's own `finally` would not)."""

    def __init__(self, stream: Iterator[bytes], on_close: Callable[[], None]) -> None:
        self.stream, self.on_close = stream, on_close

    def __iter__(self) -> Iterator[bytes]:
        return self.stream

    def close(self) -> None:
        try:
            getattr(self.stream, "close", lambda: None)()
        finally:
            self.on_close()


class _AsyncClosing:
    """`_SyncClosing` for an async stream (Django registers `close` whatever the iterator's kind)."""

    def __init__(self, stream: AsyncIterator[bytes], on_close: Callable[[], None]) -> None:
        self.stream, self.on_close = stream, on_close

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.stream

    def close(self) -> None:
        self.on_close()


def closing(stream: Any, on_close: Callable[[], None]) -> Any:
    """`stream` (sync or async) wrapped so that `on_close` runs when the response closes it, iterated or not.
    `on_close` must be safe to call twice (the stream's own end may call it too)."""
    return _AsyncClosing(stream, on_close) if hasattr(stream, "__aiter__") else _SyncClosing(stream, on_close)
