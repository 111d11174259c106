"""Keeping live turns' data bounded (SPEC 16, docs/privacy.md#retention): plain functions a periodic pass runs.

- `turn_logs_prune`: a turn that ended `LIVE_TURN_EVENTS_KEEP_SECONDS` ago
  loses its event log and its checkpoint (a failed turn keeps its checkpoint
  until then, for staff to look at). Its row stays (status, session, times),
  so a reconnect to it is answered `410` naming its session
  (`turn_events_pruned`), whose GET holds the stored row.
- `old_turns_prune`: with `CHAT_LOG_MAX_AGE_DAYS`, ended turns older than that
  go whole, as their `ai_chat_logs` rows do (`chat.retention`).

Each deletes in batches of `batch_size` rows chosen by primary key, each batch
its own short transaction (one `DELETE ... WHERE id IN (...)`), so no table is
locked for long and running turns write on between batches. `now` is the
clock, passed in so tests and the benchmark age data without waiting.
"""

from __future__ import annotations

import datetime as dt
import uuid

from django.db.models import QuerySet

from live.db import write_transaction
from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus

__all__ = ["old_turns_prune", "turn_events_pruned", "turn_logs_prune"]

ENDED = (LiveTurnStatus.DONE, LiveTurnStatus.FAILED)


def _delete_in_batches(rows: QuerySet, batch_size: int) -> int:
    """Delete `rows` (ordered by primary key) `batch_size` at a time, a transaction per batch; how many."""
    if batch_size < 1:
        raise ValueError("batch_size must be positive")
    model = rows.model
    total = 0
    while True:
        with write_transaction():
            ids = list(rows.order_by("pk").values_list("pk", flat=True)[:batch_size])
            deleted = model.objects.filter(pk__in=ids).delete()[0] if ids else 0
        if not ids:
            return total
        total += deleted


def turn_logs_prune(*, now: dt.datetime, keep: dt.timedelta, batch_size: int) -> tuple[int, int]:
    """Delete the events and checkpoints of turns that ended before `now - keep`: `(events, checkpoints)`."""
    cutoff = now - keep
    ended = LiveTurn.objects.filter(status__in=ENDED, finished_at__lt=cutoff)
    events = _delete_in_batches(LiveTurnEvent.objects.filter(turn__in=ended.values("pk")), batch_size)
    checkpoints = 0
    kept = ended.filter(created_at__lt=cutoff, checkpoint__isnull=False)
    while True:
        with write_transaction():
            ids = list(kept.order_by("pk").values_list("pk", flat=True)[:batch_size])
            if ids:
                checkpoints += LiveTurn.objects.filter(pk__in=ids).update(checkpoint=None)
        if not ids:
            return events, checkpoints


def old_turns_prune(*, now: dt.datetime, max_age: dt.timedelta, batch_size: int) -> tuple[int, int]:
    """Delete ended turns created before `now - max_age`, their events first: `(turns, events)`."""
    old = LiveTurn.objects.filter(status__in=ENDED, created_at__lt=now - max_age)
    events = _delete_in_batches(LiveTurnEvent.objects.filter(turn__in=old.values("pk")), batch_size)
    return _delete_in_batches(old, batch_size), events


def turn_events_pruned(turn_id: uuid.UUID) -> bool:
    """Whether an ended turn's event log was pruned (every turn's log starts with its `turn` event). One query."""
    return not LiveTurnEvent.objects.filter(turn_id=turn_id).exists()
