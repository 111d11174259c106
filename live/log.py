"""The durable event log of live turns (docs/live.md).

Every SSE event is appended to `chat_live_turn_events` by the turn's worker
*before* any client sees it; the SSE views only tail the log. So a client
that reconnects (`Last-Event-ID`), or another server process, reads exactly
what the first client read. `append_events` also wakes the tails
(`live.db.append_batch`); `turn_fail` ends a turn with its `error` event.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable
from typing import Any

import orjson
from django.db import connection
from django.utils import timezone

from citations.live_events import StreamEvent, error_event
from citations.text import storable_json
from live.db import (
    append_batch,
    events_after_postgresql,
    notify_turn,
    one_writer,
    owned_turn_events_postgresql,
    reads_in_one_statement,
)
from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus

__all__ = [
    "LostTurnError",
    "append_event",
    "append_events",
    "encode",
    "events_after",
    "owned_turn",
    "owned_turn_events",
    "release_connection",
    "turn_fail",
]

logger = logging.getLogger(__name__)


class LostTurnError(Exception):
    """The worker no longer owns the turn: another worker took it over (a redelivered task) or it ended."""


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
    worker never writes. The conditional UPDATE of the turn's row comes first
    and holds it until commit, so ids are gapless and increasing.
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
    """`append_event` for several `(name, encoded data)` events in one write (`live.db.append_batch`: one
    statement on PostgreSQL); returns the last id."""
    rows = [(after + i, event, data) for i, (event, data) in enumerate(events, 1)]
    if not append_batch(turn_id, token, rows, after=after, finish=finish):
        raise LostTurnError(str(turn_id))
    return after + len(rows)


def release_connection() -> None:
    """Give this thread's (or context's) database connection back to the pool (PostgreSQL's psycopg-pool).

    A stream lives for minutes, a turn waits on the model between events: a
    connection either kept between reads or writes would be one pooled
    connection per open stream or running turn. Without a pool (SQLite, or
    `DATABASE_POOL=false`) the connection stays: reopening costs more than it frees.
    """
    if connection.settings_dict.get("OPTIONS", {}).get("pool") and not connection.in_atomic_block:
        connection.close()


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
    with one_writer():
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
        ended = bool(running.update(**finish))
    if ended:
        notify_turn(turn_id)  # no event says so: its streams read the log and end
    return ended


def events_after(turn_id: uuid.UUID, after: int, *, limit: int = 1000) -> list[tuple[int, str, str]]:
    """The turn's events with `seq > after`, oldest first, as `(seq, event, data)`. One query: on PostgreSQL a
    statement of its own (`live.db.events_after_postgresql`: each stream's first read, where compiling the
    queryset cost more than running it, bench/orm_vs_raw.py "stream reads"), held to this queryset by
    `tests/live/test_log.py`."""
    if reads_in_one_statement():
        return events_after_postgresql(turn_id, after, limit)
    rows: Iterable[tuple[int, str, str]] = (
        LiveTurnEvent.objects.filter(turn_id=turn_id, seq__gt=after)
        .order_by("seq")
        .values_list("seq", "event", "data")[:limit]
    )
    return list(rows)


def owned_turn(user_id: Any, turn_id: uuid.UUID) -> tuple[str, int, uuid.UUID] | None:
    """The turn's `(status, last_seq, session_id)` when it is `user_id`'s, else None (another user's turn
    is not found, SPEC 11). One statement."""
    return LiveTurn.objects.filter(pk=turn_id, user_id=user_id).values_list("status", "last_seq", "session_id").first()


def owned_turn_events(
    user_id: Any, turn_id: uuid.UUID, after: int, *, limit: int = 1000
) -> tuple[tuple[str, int, uuid.UUID], list[tuple[int, str, str]]] | None:
    """`(owned_turn(user_id, turn_id), events_after(turn_id, after, limit=limit))` when the turn is `user_id`'s,
    else None: what a stream open reads (SPEC 11; docs/live.md#direct-opens). One statement on PostgreSQL
    (`live.db.owned_turn_events_postgresql`: a queryset compiled per open cost about as much as running
    it, bench/README.md "Fourth pass"); elsewhere the two querysets. `tests/live/test_log.py` holds the
    statement to them on any rows (hypothesis)."""
    if reads_in_one_statement():
        return owned_turn_events_postgresql(user_id, turn_id, after, limit)
    turn = owned_turn(user_id, turn_id)
    return None if turn is None else (turn, events_after(turn_id, after, limit=limit))
