"""Waking the streams that follow a turn (docs/live.md#how-a-stream-wakes).

The worker's transaction that appends events also sends `NOTIFY
silvia_live_turns` (PostgreSQL), the payload being the turn id, then the
events one a line when they fit (`notify_payload`). One `LISTEN` connection
per server process (`ensure_listener`) hands each notification to the
in-process `notifier`, which wakes the streams of that turn with the events
it carried. On SQLite there is no listener: tails poll.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid

import psycopg
from django.db import connection, connections, transaction

__all__ = [
    "NOTIFY_CHANNEL",
    "Notifier",
    "ensure_listener",
    "notifier",
    "notify_commit",
    "notify_payload",
    "parse_payload",
    "stop_listener",
]

logger = logging.getLogger(__name__)

NOTIFY_CHANNEL = "silvia_live_turns"


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


_started = False
_lock = threading.Lock()
_stop = threading.Event()
_thread: threading.Thread | None = None


def ensure_listener() -> bool:
    """Start this process's listener thread once (PostgreSQL only). True when one runs."""
    global _started, _thread
    if connections["default"].vendor != "postgresql":
        return False
    with _lock:
        if not _started:
            params = connections["default"].get_connection_params()
            _stop.clear()
            _thread = threading.Thread(target=_listen_forever, args=(params,), name="live-turn-listener", daemon=True)
            _thread.start()
            _started = True
    return True


def stop_listener() -> None:
    """Stop this process's listener and close its connection (tests, before dropping their database)."""
    global _started
    with _lock:
        thread, _started = _thread, False
    _stop.set()
    if thread is not None:
        thread.join(5)


def _listen_forever(params: dict) -> None:
    params = {key: value for key, value in params.items() if key not in ("cursor_factory", "context")}
    while not _stop.is_set():
        try:
            with psycopg.connect(**params, autocommit=True) as conn:
                conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                while not _stop.is_set():
                    for note in conn.notifies(timeout=0.5):
                        turn_id = note.payload.partition("\n")[0]
                        if notifier.watching(turn_id):  # the events matter only to a stream here
                            notifier.notify(*parse_payload(note.payload))
                        else:
                            notifier.notify(turn_id)
        except Exception:  # a lost connection: tails still poll meanwhile
            logger.warning("live turn listener lost its connection; reconnecting", exc_info=True)
            _stop.wait(1)
