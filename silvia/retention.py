"""The retention pass (SPEC 16, docs/privacy.md#retention): one run of every pruning service, for the job engine's
periodic timer.

`retention_pass()` runs, each in batches (one short transaction a batch):

1. `live.retention.turn_logs_prune`: events and checkpoints of turns that
   ended `LIVE_TURN_EVENTS_KEEP_SECONDS` ago (a day by default);
2. with `CHAT_LOG_MAX_AGE_DAYS` set: `chat.retention.chat_logs_prune` (older
   turns, then sessions left empty) and `live.retention.old_turns_prune`;
3. on the embedded broker: the messages workers took
   (`silvia.embedded_broker.prune_taken_messages`; RabbitMQ deletes them itself).

It logs one line of counts. `retention_pass_task` is the Celery task that runs
it once (`silvia.retention_pass`), loaded by workers through `CELERY_IMPORTS`.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import asdict, dataclass

from celery import shared_task
from django.conf import settings
from django.utils import timezone

__all__ = ["RetentionCounts", "retention_pass", "retention_pass_task"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetentionCounts:
    """What one pass deleted: rows of each kind."""

    events: int = 0
    checkpoints: int = 0
    chat_logs: int = 0
    sessions: int = 0
    live_turns: int = 0
    broker_messages: int = 0


def retention_pass(*, now: dt.datetime | None = None, batch_size: int | None = None) -> RetentionCounts:
    """Run each pruning service once with the settings' ages (`now`: the clock; `batch_size`:
    `RETENTION_BATCH_SIZE`). Safe to run while turns run and requests are served."""
    from chat.retention import chat_logs_prune
    from live.retention import old_turns_prune, turn_logs_prune

    now = now or timezone.now()
    batch = batch_size or settings.RETENTION_BATCH_SIZE
    keep = dt.timedelta(seconds=settings.LIVE_TURN_EVENTS_KEEP_SECONDS)
    events, checkpoints = turn_logs_prune(now=now, keep=keep, batch_size=batch)
    chat_logs = sessions = live_turns = 0
    if settings.CHAT_LOG_MAX_AGE_DAYS is not None:
        max_age = dt.timedelta(days=settings.CHAT_LOG_MAX_AGE_DAYS)
        chat_logs, sessions = chat_logs_prune(now=now, max_age=max_age, batch_size=batch)
        live_turns, old_events = old_turns_prune(now=now, max_age=max_age, batch_size=batch)
        events += old_events
    broker_messages = 0
    if settings.CELERY_BROKER_EMBEDDED:
        from silvia.embedded_broker import prune_taken_messages

        broker_messages = prune_taken_messages(batch_size=batch)
    counts = RetentionCounts(events, checkpoints, chat_logs, sessions, live_turns, broker_messages)
    logger.info("retention pass: %s", ", ".join(f"{name} {n}" for name, n in asdict(counts).items()))
    return counts


@shared_task(name="silvia.retention_pass", ignore_result=True)
def retention_pass_task() -> dict[str, int]:
    """One retention pass (`retention_pass`), for the job engine's periodic timer."""
    return asdict(retention_pass())
