"""The durable event log of live turns (docs/live.md).

Every SSE event is appended to `chat_live_turn_events` by the turn's worker
*before* any client sees it; the SSE views only tail the log. So a client
that reconnects (`Last-Event-ID`), or another server process, reads exactly
what the first client read.

Waking the tails: an in-process notifier wakes streams served by the process
that runs the turn at once; on PostgreSQL a `NOTIFY` (one `LISTEN`
connection per process, `chat.live.listener`) wakes the others; on SQLite the
others poll (`LIVE_TURN_POLL_SECONDS`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import orjson
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from chat.models import LiveTurn, LiveTurnEvent, LiveTurnStatus
from citations.live_events import EventName, StreamEvent, error_event, text_event
from citations.text import storable_json

__all__ = [
    "NOTIFY_CHANNEL",
    "EventWriter",
    "LostTurnError",
    "append_event",
    "encode",
    "events_after",
    "format_retry",
    "format_sse",
    "notifier",
    "release_connection",
    "turn_fail",
]

logger = logging.getLogger(__name__)

NOTIFY_CHANNEL = "silvia_live_turns"


class LostTurnError(Exception):
    """The worker no longer owns the turn: another worker took it over (a redelivered task) or it ended."""


# JSON leaves these raw inside strings, and line-splitting clients (Python's
# `str.splitlines()`, httpx `iter_lines`) end a line at each: escaped, every
# client reads every event (docs/live.md#the-wire-format).
_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def format_sse(seq: int, event: str, data: str) -> bytes:
    """One SSE frame: `id: <seq>`, `event: <name>`, `data: <json>` on one line (docs/live.md#the-wire-format).

    `data` is the event's JSON text as stored; U+2028, U+2029 and U+0085 in
    it are written as JSON escapes (JSON has no other raw line break).
    """
    return f"id: {seq}\nevent: {event}\ndata: {data.translate(_LINE_BREAKS)}\n\n".encode()


def format_retry(milliseconds: int) -> bytes:
    """The `retry:` field, sent once at the start of each stream: how long an EventSource waits to reconnect."""
    return f"retry: {milliseconds}\n\n".encode()


def encode(event: StreamEvent) -> str:
    """The `data:` JSON text of an event (UTF-8, non-ASCII kept, no newline). Never raises.

    Events are built from text made storable first (`citations.text`); should
    one still hold what orjson refuses (a lone surrogate, an integer past 64
    bits), its strings are made storable, the stdlib encodes it, and a log
    line says so (the event's name and the count, never its content).
    """
    try:
        return orjson.dumps(event.data).decode()
    except TypeError:
        data, replaced = storable_json(event.data)
        logger.warning("a %s event was not encodable: %d character(s) replaced with U+FFFD", event.name, replaced)
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)


def append_event(
    turn_id: uuid.UUID, token: uuid.UUID, event: StreamEvent, *, after: int, finish: dict[str, Any] | None = None
) -> int:
    """Append one event after event id `after` (the worker's last) and return its id, `after + 1`.

    `finish` holds `LiveTurn` fields written in the same statement (the
    status of a `done` or `error` event), so no reader sees the last event
    of a turn that still looks running.

    Raises `LostTurnError` when `token` is no longer the turn's worker token
    (another worker resumed it) or the log moved past `after`, so a stale
    worker never writes. The UPDATE holds the turn's row until commit, so ids
    are gapless and increasing. Two statements and a commit.
    """
    return append_events(turn_id, token, [(event.name, encode(event))], after=after, finish=finish)


def append_events(
    turn_id: uuid.UUID,
    token: uuid.UUID,
    events: list[tuple[str, str]],
    *,
    after: int,
    finish: dict[str, Any] | None = None,
) -> int:
    """`append_event` for several `(name, encoded data)` events in one transaction; returns the last id."""
    last = after + len(events)
    rows = [
        LiveTurnEvent(turn_id=turn_id, seq=after + i, event=event, data=data)
        for i, (event, data) in enumerate(events, 1)
    ]
    with sqlite_write_lock(), transaction.atomic():
        updated = (
            LiveTurn.objects.running_for_worker(turn_id, token)
            .filter(last_seq=after)
            .update(last_seq=last, **(finish or {}))
        )
        if not updated:
            raise LostTurnError(str(turn_id))
        LiveTurnEvent.objects.bulk_create(rows)
        notify_commit(turn_id, [(row.seq, row.event, row.data) for row in rows])
    return last


def release_connection() -> None:
    """Give this thread's (or context's) database connection back to the pool (PostgreSQL's psycopg-pool).

    A stream lives for minutes, a turn waits on the model between events: a
    connection either kept between reads or writes would be one pooled
    connection per open stream or running turn. Without a pool (SQLite, or
    `DATABASE_POOL=false`) the connection stays: reopening costs more than it frees.
    """
    if connection.settings_dict.get("OPTIONS", {}).get("pool") and not connection.in_atomic_block:
        connection.close()


class EventWriter:
    """Appends a worker's events to the log in small batches, from the turn's own thread.

    Consecutive `text` events are merged into one before the batch is written
    (and before the merged event gets its id), so the log, and every client,
    holds the merged event. A batch is written at most every `interval`
    seconds (`LIVE_TURN_FLUSH_SECONDS`): an event that comes after a quiet
    spell (the first text of a step) is written at once; the others wait for
    the next write, done by the turn's thread when its next event comes, or
    by this process's flusher thread when the model goes quiet first. One
    transaction, one `INSERT` and one `NOTIFY` per batch.

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
        self.interval = settings.LIVE_TURN_FLUSH_SECONDS if interval is None else interval
        self._pending: list[StreamEvent] = []
        self._lock = threading.Lock()
        self._last_write = -math.inf
        self._error: BaseException | None = None
        if self.interval > 0:
            _flusher.add(self)

    def put(self, event: StreamEvent) -> None:
        """Hold `event` for the next batch (merged into the held `text` before it), writing the batch when due."""
        with self._lock:
            self._raise_error()
            pending = self._pending
            if pending and event.name == EventName.TEXT and pending[-1].name == EventName.TEXT:
                pending[-1] = text_event(pending[-1].data["text"] + event.data["text"])
            else:
                pending.append(event)
            if time.monotonic() - self._last_write >= self.interval:
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
            if self._pending and self._error is None and now - self._last_write >= self.interval:
                try:
                    self._write()
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

    def _write(self) -> None:
        events, self._pending = self._pending, []
        try:
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
            tick = min((writer.interval for writer in writers), default=0.05) / 4
            now = time.monotonic()
            for writer in writers:
                writer.flush_due(now)
            time.sleep(tick)


_flusher = _Flusher()


def turn_fail(turn_id: uuid.UUID, *, kind: str, message: str, token: uuid.UUID | None = None) -> bool:
    """End a running turn `failed`, with its `error` event when that can be written (docs/live.md#failures).

    The `error` event (`{"type": kind, "message": message}`, the message fit
    to show a user) is appended after the turn's last event, in the same
    transaction as the status. When it cannot be written (any error but the
    database being gone), the status, `error` and `finished_at` are written
    without it, so the turn never stays `running`: its streams end and a
    reconnect gets 204. `token`: only while this worker token holds the turn;
    None for whoever holds it (a resumer giving up on a turn). Returns whether
    this call ended the turn (False: it was not running, or not held by
    `token`). Raises only when the database refuses the status update too.
    """
    event = error_event(kind=kind, message=message)
    finish = {"status": LiveTurnStatus.FAILED, "error": event.data["error"], "finished_at": timezone.now()}
    running = LiveTurn.objects.filter(pk=turn_id, status=LiveTurnStatus.RUNNING)
    if token is not None:
        running = running.filter(worker_token=token)
    with sqlite_write_lock():
        for _ in range(3):  # a worker may append meanwhile: read its last id again
            held = running.values_list("worker_token", "last_seq").first()
            if held is None:
                return False
            try:
                append_events(turn_id, held[0], [(event.name, encode(event))], after=held[1], finish=finish)
                return True
            except LostTurnError:
                if token is not None:
                    return False  # another worker took the turn: its own end stands
            except Exception as error:  # the event cannot be written: the status alone
                logger.warning("turn %s: its error event could not be written (%s)", turn_id, type(error).__name__)
                break
        return bool(running.update(**finish))


_sqlite_lock = threading.RLock()


@contextlib.contextmanager
def sqlite_write_lock() -> Iterator[None]:
    """On SQLite, one writer at a time within this process.

    SQLite has one write lock per database; threads that wait for it in
    SQLite's busy handler sleep in growing steps (up to 100 ms), which would
    stall every stream. A Python lock hands it over at once. Every write
    transaction of live turns takes it *before* `BEGIN` (it is reentrant),
    so no thread waits for it while holding SQLite's lock. PostgreSQL locks
    rows, so nothing is held there.
    """
    if connection.vendor != "sqlite":
        yield
        return
    with _sqlite_lock:
        yield


def notify_commit(turn_id: uuid.UUID, rows: list[tuple[int, str, str]] | None = None) -> None:
    """Wake every tail of `turn_id` once the current transaction commits.

    On PostgreSQL the `NOTIFY` payload is the turn id, followed by `rows`
    (`(seq, event, data)`, the events this transaction appends) one per line
    when they fit in a payload (`notify_payload`): a web process's tails then
    send them without reading the log (`Notifier.take`).
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [NOTIFY_CHANNEL, notify_payload(turn_id, rows)])
    transaction.on_commit(lambda: notifier.notify(str(turn_id)))


#: PostgreSQL refuses a NOTIFY payload of 8000 bytes or more.
MAX_PAYLOAD_BYTES = 7900


def notify_payload(turn_id: uuid.UUID, rows: list[tuple[int, str, str]] | None) -> str:
    """`<turn id>`, then `<seq> <event> <data>` per event, one a line (the JSON `data` holds no raw newline).

    The turn id alone when there are no rows or they do not fit: the tails read the log.
    """
    if rows:
        payload = "\n".join([str(turn_id), *(f"{seq} {event} {data}" for seq, event, data in rows)])
        if len(payload) <= MAX_PAYLOAD_BYTES // 4 or len(payload.encode()) <= MAX_PAYLOAD_BYTES:
            return payload
    return str(turn_id)


def parse_payload(payload: str) -> tuple[str, list[tuple[int, str, str]] | None]:
    """A `notify_payload`: the turn id and its events (None when it names none, or when a line is not
    `<seq> <event> <data>`: a payload of someone else's on the channel, so the tails read the log)."""
    turn_id, _, lines = payload.partition("\n")
    if not lines:
        return turn_id, None
    rows = []
    for line in lines.split("\n"):
        seq, _, rest = line.partition(" ")
        event, _, data = rest.partition(" ")
        if not seq.isdigit() or not event or not data:
            return turn_id, None
        rows.append((int(seq), event, data))
    return turn_id, rows


def events_after(turn_id: uuid.UUID, after: int, *, limit: int = 1000) -> list[tuple[int, str, str]]:
    """The turn's events with `seq > after`, oldest first, as `(seq, event, data)`. One query."""
    rows: Iterable[tuple[int, str, str]] = (
        LiveTurnEvent.objects.filter(turn_id=turn_id, seq__gt=after)
        .order_by("seq")
        .values_list("seq", "event", "data")[:limit]
    )
    return list(rows)


class Notifier:
    """In-process wake-ups per turn: a version counter plus waiting threads and event loops.

    For the turns a stream of this process follows (`watch`), it also keeps
    the events the `NOTIFY` payloads carried (the last `KEPT` of each turn,
    always consecutive), so a tail sends them without reading the log
    (`take`). A wake-up without events (no payload, an in-process commit)
    drops what is kept: the tails read the log.
    """

    KEPT = 256

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._versions: dict[str, int] = {}
        self._async: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        self._watchers: dict[str, int] = {}
        self._events: dict[str, list[tuple[int, str, str]]] = {}

    def version(self, turn_id: str) -> int:
        with self._lock:
            return self._versions.get(turn_id, 0)

    def watching(self, turn_id: str) -> bool:
        return turn_id in self._watchers

    def watch(self, turn_id: str) -> None:
        """A stream of this process follows `turn_id`: keep the events notifications carry."""
        with self._lock:
            self._watchers[turn_id] = self._watchers.get(turn_id, 0) + 1

    def unwatch(self, turn_id: str) -> None:
        with self._lock:
            left = self._watchers.get(turn_id, 0) - 1
            if left > 0:
                self._watchers[turn_id] = left
            else:
                self._watchers.pop(turn_id, None)
                self._events.pop(turn_id, None)

    def take(self, turn_id: str, after: int) -> list[tuple[int, str, str]] | None:
        """The kept events after id `after` ([] when none is newer), or None when the log must be read
        (nothing kept, or the kept events start after `after + 1`)."""
        with self._lock:
            kept = self._events.get(turn_id)
            if not kept or kept[0][0] > after + 1:
                return None
            return [row for row in kept if row[0] > after]

    def notify(self, turn_id: str, rows: list[tuple[int, str, str]] | None = None) -> None:
        with self._lock:
            self._versions[turn_id] = self._versions.get(turn_id, 0) + 1
            if turn_id in self._watchers:
                kept = self._events.get(turn_id)
                if rows is None:
                    self._events.pop(turn_id, None)
                elif kept and kept[-1][0] + 1 == rows[0][0]:
                    kept.extend(rows)
                    del kept[: -self.KEPT]
                else:
                    self._events[turn_id] = list(rows[-self.KEPT :])
            waiters = list(self._async.get(turn_id, ()))
            self._cond.notify_all()
        for loop, event in waiters:
            loop.call_soon_threadsafe(event.set)

    def wait(self, turn_id: str, seen: int, timeout: float) -> bool:
        """Block until `turn_id` moves past version `seen` or `timeout` seconds pass; whether it moved."""
        with self._cond:
            return self._cond.wait_for(lambda: self._versions.get(turn_id, 0) != seen, timeout=timeout)

    async def wait_async(self, turn_id: str, seen: int, timeout: float) -> bool:
        """`wait` for an event loop: no thread is held while waiting."""
        event = asyncio.Event()
        key = (asyncio.get_running_loop(), event)
        with self._lock:
            if self._versions.get(turn_id, 0) != seen:
                return True
            self._async.setdefault(turn_id, set()).add(key)
        try:
            await asyncio.wait_for(event.wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            with self._lock:
                waiting = self._async.get(turn_id)
                if waiting is not None:
                    waiting.discard(key)
                    if not waiting:
                        del self._async[turn_id]


notifier = Notifier()
