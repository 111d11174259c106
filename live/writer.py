"""Batching a worker's events into the log: `EventWriter` (docs/live.md#batches)."""

from __future__ import annotations

import math
import threading
import time
import uuid
from typing import TYPE_CHECKING

from django.conf import settings

from citations.live_events import EventName, StreamEvent, text_event
from live.log import append_events, encode, release_connection
from telemetry import tracing

if TYPE_CHECKING:
    from opentelemetry.context import Context

__all__ = ["EventWriter", "batch_interval"]


def batch_interval(turns: int, *, least: float) -> float:
    """The seconds between two batches of a turn when this process runs `turns` turns: `least` (0: every
    event on its own), grown so the process writes at most `LIVE_TURN_BATCHES_PER_SECOND` batches a second,
    up to `LIVE_TURN_FLUSH_MAX_SECONDS` (never below `least`; a rate of 0 or less: `least` always). At 100 a
    second: up to 5 turns 0.05 s; 10: 0.1 s; 20: 0.2 s; 25 or more: 0.25 s (docs/live.md#batches-under-load)."""
    if least <= 0:
        return 0.0
    rate = settings.LIVE_TURN_BATCHES_PER_SECOND
    grown = turns / rate if rate > 0 else least
    return max(least, min(grown, settings.LIVE_TURN_FLUSH_MAX_SECONDS))


class EventWriter:
    """Appends a worker's events to the log in small batches, from the turn's own thread.

    Consecutive `text` events are merged into one before the batch is written
    (and before the merged event gets its id), so the log, and every client,
    holds the merged event. A batch is written at most every `interval()`
    seconds: an event that comes after a quiet spell (the first text of a
    step) is written at once; the others wait for the next write, done by the
    turn's thread when its next event comes, or by this process's flusher
    thread when the model goes quiet first. One statement (an `UPDATE`, an
    `INSERT` and a `NOTIFY`) per batch.

    The interval grows with the turns this process runs (`batch_interval`):
    `LIVE_TURN_FLUSH_SECONDS` while they are few, so the process writes at
    most `LIVE_TURN_BATCHES_PER_SECOND` batches a second in all, up to
    `LIVE_TURN_FLUSH_MAX_SECONDS`. A batch costs the same CPU however many
    events it holds (the worker's statement, PostgreSQL's, each stream
    process's notification and frames): under load a turn's text comes in
    fewer, larger pieces instead of costing more (docs/live.md#batches).
    `interval` given: that fixed interval (tests).

    No connection is kept between batches: each borrows one from the pool and
    gives it back, so a running turn holds a database connection only while
    it writes (docs/deploying.md#database-connections). An event still held
    is in no log and was sent to no one: a worker that dies loses only what
    no client has read. `put` and `flush` raise `LostTurnError` when another
    worker took the turn over, and any error of a batch the flusher wrote.
    `written` is the id of the last event in the log.
    """

    def __init__(self, turn_id: uuid.UUID, token: uuid.UUID, *, after: int, interval: float | None = None) -> None:
        self.turn_id, self.token, self.written = turn_id, token, after
        self._fixed = interval
        base = settings.LIVE_TURN_FLUSH_SECONDS if interval is None else interval
        self._pending: list[StreamEvent] = []
        self._lock = threading.Lock()
        self._last_write = -math.inf
        self._error: BaseException | None = None
        # The flusher's batches go in the trace of the turn (docs/metrics.md#traces): its thread has none.
        self._trace_parent = tracing.current_context()
        if base > 0:
            _flusher.add(self)

    def interval(self) -> float:
        """Seconds at least between two batches of this turn, now (see the class)."""
        if self._fixed is not None:
            return self._fixed
        return batch_interval(_flusher.writers(), least=settings.LIVE_TURN_FLUSH_SECONDS)

    def put(self, event: StreamEvent) -> None:
        """Hold `event` for the next batch (merged into the held `text` before it), writing the batch when due."""
        with self._lock:
            self._raise_error()
            pending = self._pending
            if pending and event.name == EventName.TEXT and pending[-1].name == EventName.TEXT:
                pending[-1] = text_event(pending[-1].data["text"] + event.data["text"])
            else:
                pending.append(event)
            if time.monotonic() - self._last_write >= self.interval():
                self._write()

    def flush(self) -> None:
        """Write the events held now (before a checkpoint, the final events, or a `rewind` that names an id)."""
        with self._lock:
            self._raise_error()
            if self._pending:
                self._write()

    def flush_due(self, now: float) -> None:
        """The flusher's call: write the held events once `interval` passed since the last batch."""
        if not self._lock.acquire(blocking=False):
            return  # the turn's thread is writing
        try:
            if self._pending and self._error is None and now - self._last_write >= self.interval():
                try:
                    self._write(trace_parent=self._trace_parent)
                except BaseException as error:  # the turn's thread raises it at its next event
                    self._error = error
        finally:
            self._lock.release()

    def close(self) -> None:
        """The turn is over: the flusher forgets this writer (events still held are dropped)."""
        _flusher.discard(self)

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def _write(self, *, trace_parent: Context | None = None) -> None:
        """Write the held events as one batch, in a `write_events` span (under `trace_parent`, else this
        thread's current span)."""
        events, self._pending = self._pending, []
        try:
            with tracing.span("write_events", attributes={"silvia.events.count": len(events)}, parent=trace_parent):
                self.written = append_events(
                    self.turn_id, self.token, [(event.name, encode(event)) for event in events], after=self.written
                )
        finally:
            self._last_write = time.monotonic()
            release_connection()


class _Flusher:
    """One thread per process writing the batches of turns whose model went quiet (`EventWriter.flush_due`)."""

    def __init__(self) -> None:
        self._writers: set[EventWriter] = set()
        self._lock = threading.Lock()
        self._busy = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, writer: EventWriter) -> None:
        with self._lock:
            self._writers.add(writer)
            self._busy.set()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="live-turn-flusher", daemon=True)
                self._thread.start()

    def writers(self) -> int:
        """How many turns of this process write events now."""
        return len(self._writers)

    def discard(self, writer: EventWriter) -> None:
        with self._lock:
            self._writers.discard(writer)
            if not self._writers:
                self._busy.clear()

    def _run(self) -> None:
        while True:
            self._busy.wait()
            with self._lock:
                writers = list(self._writers)
            tick = min((writer.interval() for writer in writers), default=0.05) / 4
            now = time.monotonic()
            for writer in writers:
                writer.flush_due(now)
            time.sleep(tick)


_flusher = _Flusher()
