"""The engine's own sweep: every turn ends, with no request arriving (SPEC 11; docs/job-engine.md#the-workers-sweep).

`sweep()` runs in every worker every `LIVE_TURN_SWEEP_SECONDS`, on the Celery worker's own timer (a
bootstep of `silvia.celery`: Celery's documented extension point, no beat and no cron of ours), and at the
worker's start:

- `resend_unsent`: a turn committed `queued` whose task never reached the broker (its process died between
  the commit and the publish: it has no `sent_at`) is sent again once it is `LIVE_TURN_RESEND_AFTER_SECONDS`
  old, under a new task id set only while the turn is still queued and unsent (a compare-and-set), so the
  first task, should it reach the broker after all, does nothing (`live.engine.turn_acquire` runs only the
  turn's own task): exactly once in effect, whichever workers sweep at once.
- `live.engine.sweep_stuck_turns`: a turn past `LIVE_TURN_QUEUED_TIMEOUT_SECONDS` (queued) or
  `LIVE_TURN_STALLED_SECONDS` (running with no write) ends with an `error` event `stuck`, which its open
  streams read (the event's NOTIFY, or their poll) and end on: within a sweep's interval of its bound.
- `requeue_orphans` (the embedded broker, at the worker's start only: it has no redelivery).

This module sits above `live.engine` and `live.service` (it uses both, neither imports it), so the engine
needs nothing of the service: no import circle.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from live.db import one_writer
from live.engine import sweep_stuck_turns
from live.models import LiveTurn, LiveTurnStatus
from live.service import QueueUnavailableError, enqueue

__all__ = ["requeue_orphans", "resend_unsent", "sweep"]

logger = logging.getLogger(__name__)


def resend_unsent(now: dt.datetime | None = None) -> int:
    """Send again each queued turn with no `sent_at` older than `LIVE_TURN_RESEND_AFTER_SECONDS` (and not yet
    stuck), each under a new task id; how many were sent."""
    now = now or timezone.now()
    old = now - dt.timedelta(seconds=settings.LIVE_TURN_RESEND_AFTER_SECONDS)
    unsent = LiveTurn.objects.filter(status=LiveTurnStatus.QUEUED, sent_at__isnull=True, created_at__lt=old)
    sent = 0
    for turn in list(unsent.only("id", "task_id")):
        new_task = uuid.uuid4()
        with one_writer():
            taken = LiveTurn.objects.filter(
                pk=turn.pk, status=LiveTurnStatus.QUEUED, sent_at__isnull=True, task_id=turn.task_id
            ).update(task_id=new_task)
        if not taken:
            continue  # started, sent or sent again by another worker meanwhile
        turn.task_id = new_task
        logger.warning("turn %s: its task never reached the broker; sent again", turn.id)
        try:
            enqueue(turn)
        except QueueUnavailableError:
            continue  # the turn failed with queue_unavailable, which its client reads
        sent += 1
    return sent


def requeue_orphans() -> int:
    """Queue every queued or running turn again with a new task id (the embedded worker's start: no other
    worker can be running them, and a message it had taken is gone); their older tasks do nothing."""
    requeued = 0
    for turn in list(LiveTurn.objects.active()):
        turn.task_id = uuid.uuid4()
        with one_writer():
            changed = LiveTurn.objects.filter(pk=turn.pk, status__in=[turn.status]).update(task_id=turn.task_id)
        if changed:
            enqueue(turn)
            requeued += 1
    return requeued


def sweep() -> tuple[int, int]:
    """One sweep: (turns sent again, stuck turns ended). Raises the database's errors; the caller logs them.
    Gives this thread's database connection back at the end (it runs on the worker's timer thread)."""
    try:
        return resend_unsent(), sweep_stuck_turns()
    finally:
        close_old_connections()
