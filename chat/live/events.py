"""The durable event log of live turns (SPEC section 11).

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
import threading
import uuid
from collections.abc import Iterable
from typing import Any

import orjson
from django.db import connection, transaction
from django.db.models import F

from chat.models import LiveTurn, LiveTurnEvent

__all__ = [
    "FINAL_EVENTS",
    "NOTIFY_CHANNEL",
    "LostTurnError",
    "append_event",
    "events_after",
    "format_sse",
    "notifier",
]

#: Events after which a turn's stream closes.
FINAL_EVENTS = frozenset({"done", "error"})
NOTIFY_CHANNEL = "silvia_live_turns"


class LostTurnError(Exception):
    """The worker no longer owns the turn: a resumer claimed it (its heartbeat was stale) or it ended."""


def format_sse(seq: int, event: str, data: str) -> bytes:
    """One SSE frame: `id: <seq>`, `event: <name>`, `data: <json>` (one line: JSON has no raw newline)."""
    return f"id: {seq}\nevent: {event}\ndata: {data}\n\n".encode()


def encode(data: Any) -> str:
    """The `data:` JSON text of an event (UTF-8, non-ASCII kept, no newline)."""
    return orjson.dumps(data).decode()


def append_event(
    turn_id: uuid.UUID, token: uuid.UUID, event: str, data: Any, *, finish: dict[str, Any] | None = None
) -> int:
    """Append one event to the turn's log and return its id (`seq`).

    `finish` holds `LiveTurn` fields written in the same statement (the
    status of a `done` or `error` event), so no reader sees the last event
    of a turn that still looks running.

    Raises `LostTurnError` when `token` is no longer the turn's worker token
    (another worker resumed it), so a stale worker never writes. The
    transaction holds the turn's row, so ids are gapless and increasing.
    """
    text = encode(data)
    with transaction.atomic():
        updated = LiveTurn.objects.filter(pk=turn_id, worker_token=token, status="running").update(
            last_seq=F("last_seq") + 1, **(finish or {})
        )
        if not updated:
            raise LostTurnError(str(turn_id))
        seq = LiveTurn.objects.filter(pk=turn_id).values_list("last_seq", flat=True).get()
        LiveTurnEvent.objects.create(turn_id=turn_id, seq=seq, event=event, data=text)
        notify_commit(turn_id)
    return seq


def notify_commit(turn_id: uuid.UUID) -> None:
    """Wake every tail of `turn_id` once the current transaction commits."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [NOTIFY_CHANNEL, str(turn_id)])
    transaction.on_commit(lambda: notifier.notify(str(turn_id)))


def events_after(turn_id: uuid.UUID, after: int, *, limit: int = 1000) -> list[tuple[int, str, str]]:
    """The turn's events with `seq > after`, oldest first, as `(seq, event, data)`. One query."""
    rows: Iterable[tuple[int, str, str]] = (
        LiveTurnEvent.objects.filter(turn_id=turn_id, seq__gt=after)
        .order_by("seq")
        .values_list("seq", "event", "data")[:limit]
    )
    return list(rows)


class Notifier:
    """In-process wake-ups per turn: a version counter plus waiting threads and event loops."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._versions: dict[str, int] = {}
        self._async: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    def version(self, turn_id: str) -> int:
        with self._lock:
            return self._versions.get(turn_id, 0)

    def notify(self, turn_id: str) -> None:
        with self._lock:
            self._versions[turn_id] = self._versions.get(turn_id, 0) + 1
            waiters = list(self._async.get(turn_id, ()))
            self._cond.notify_all()
        for loop, event in waiters:
            loop.call_soon_threadsafe(event.set)

    def wait(self, turn_id: str, seen: int, timeout: float) -> None:
        """Block until `turn_id` moves past version `seen` or `timeout` seconds pass."""
        with self._cond:
            self._cond.wait_for(lambda: self._versions.get(turn_id, 0) != seen, timeout=timeout)

    async def wait_async(self, turn_id: str, seen: int, timeout: float) -> None:
        """`wait` for an event loop: no thread is held while waiting."""
        event = asyncio.Event()
        key = (asyncio.get_running_loop(), event)
        with self._lock:
            if self._versions.get(turn_id, 0) != seen:
                return
            self._async.setdefault(turn_id, set()).add(key)
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                waiting = self._async.get(turn_id)
                if waiting is not None:
                    waiting.discard(key)
                    if not waiting:
                        del self._async[turn_id]


notifier = Notifier()
