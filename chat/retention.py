"""Chat logs older than the configured age (SPEC 16, docs/privacy.md#retention): removed in batches.

`chat_logs_prune` deletes `ai_chat_logs` rows created before `now - max_age`
(`CHAT_LOG_MAX_AGE_DAYS`; unset, nothing is ever removed), then the sessions
left with no turn and no activity since. Batches of `batch_size` rows by
primary key, each its own short transaction: the list and the detail of every
other session are served meanwhile. `now` is the clock, passed in.
"""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet

from chat.models import ChatLog, ChatSession

__all__ = ["chat_logs_prune"]


def _delete_in_batches(rows: QuerySet, batch_size: int) -> int:
    if batch_size < 1:
        raise ValueError("batch_size must be positive")
    model, total = rows.model, 0
    while True:
        with transaction.atomic():
            ids = list(rows.values_list("pk", flat=True)[:batch_size])
            deleted = model.objects.filter(pk__in=ids).delete()[0] if ids else 0
        if not ids:
            return total
        total += deleted


def chat_logs_prune(*, now: dt.datetime, max_age: dt.timedelta, batch_size: int) -> tuple[int, int]:
    """Delete turns created before `now - max_age`, then sessions with no turn left and no update since:
    `(turns, sessions)`. The oldest go first (the `created_at` index)."""
    cutoff = now - max_age
    turns = _delete_in_batches(ChatLog.objects.filter(created_at__lt=cutoff).order_by("created_at", "pk"), batch_size)
    empty = ChatSession.objects.filter(updated_at__lt=cutoff).exclude(
        Exists(ChatLog.objects.filter(session_id=OuterRef("pk")))
    )
    return turns, _delete_in_batches(empty.order_by("pk"), batch_size)
