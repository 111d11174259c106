"""Starting live turns and handing them to job-engine workers (docs/live.md, docs/job-engine.md).

- `turn_start` admits a turn (model configured, the user's limit, the
  queue's depth), creates it `queued` with its `turn` event, and queues the
  Celery task `chat.run_live_turn` once the row is committed.
- `turn_acquire` is where a worker takes a turn: a queued turn starts; a
  running one (its task redelivered because its worker died) is taken over
  with a new worker token, at most `LIVE_TURN_MAX_RESUMES` times, then it
  fails; a finished one is left alone. There is no lease, heartbeat or cron:
  the broker redelivers a dead worker's unacknowledged task.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from chat.models import ChatSession, LiveTurn, LiveTurnEvent, LiveTurnStatus
from citations.live_events import error_event, turn_event
from live.checkpoint import initial_checkpoint
from live.configured import NOT_CONFIGURED, model_configured
from live.db import sqlite_write_lock
from live.log import encode, turn_fail
from live.wakeups import notify_commit
from telemetry import tracing

__all__ = [
    "ModelNotConfiguredError",
    "QueueFullError",
    "QueueUnavailableError",
    "SessionNotFoundError",
    "TurnConflictError",
    "TurnLimitError",
    "turn_acquire",
    "turn_start",
    "turns_orphaned_requeue",
]

logger = logging.getLogger(__name__)


class TurnConflictError(Exception):
    """The session already has a queued or running turn (docs/live.md: 409)."""


class SessionNotFoundError(Exception):
    """The session id belongs to another user (docs/live.md: 404, like a missing one)."""


class TurnLimitError(Exception):
    """The user already has `LIVE_TURN_MAX_PER_USER` queued or running turns (429)."""


class QueueFullError(Exception):
    """`LIVE_TURN_MAX_QUEUED` turns already wait for a worker (503)."""


class QueueUnavailableError(Exception):
    """The broker refused the turn's task; the turn is failed (503)."""


class ModelNotConfiguredError(Exception):
    """Neither an API key nor a base URL is configured (503)."""


@tracing.traced("start_turn", result_attributes=lambda turn: {"silvia.turn.id": str(turn.id)})
def turn_start(*, user: Any, session_id: uuid.UUID, message: str, prompt_version: str) -> LiveTurn:
    """Admit and queue a turn in the caller's session (a new session id is the caller's).

    Raises, in this order: `ModelNotConfiguredError`; `SessionNotFoundError`
    when another user owns `session_id` (as a session or through a turn);
    `TurnLimitError` past the user's limit; `QueueFullError` past the queue's
    depth; `TurnConflictError` when the session has a queued or running turn;
    `QueueUnavailableError` when the broker refuses the task (the turn is
    then failed). The turn's first event (`turn`) is in the log before this returns.
    """
    if not model_configured():
        raise ModelNotConfiguredError(NOT_CONFIGURED)
    owned_elsewhere = (
        ChatSession.objects.filter(pk=session_id).exclude(user=user).exists()
        or LiveTurn.objects.filter(session_id=session_id).exclude(user=user).exists()
    )
    if owned_elsewhere:
        raise SessionNotFoundError(str(session_id))
    turn = LiveTurn(
        session_id=session_id,
        user=user,
        user_message=message,
        prompt_version=prompt_version,
        status=LiveTurnStatus.QUEUED,
        last_seq=1,
    )
    try:
        with sqlite_write_lock(), transaction.atomic():
            # One admission at a time per user (PostgreSQL locks the user's row;
            # SQLite's IMMEDIATE transactions already run one at a time).
            get_user_model().objects.select_for_update().filter(pk=user.pk).first()
            if LiveTurn.objects.active().filter(user=user).count() >= settings.LIVE_TURN_MAX_PER_USER:
                raise TurnLimitError(str(user.pk))
            if LiveTurn.objects.filter(status=LiveTurnStatus.QUEUED).count() >= settings.LIVE_TURN_MAX_QUEUED:
                raise QueueFullError()
            turn.checkpoint = initial_checkpoint(turn)
            turn.save(force_insert=True)
            event = turn_event(turn_id=str(turn.id), session_id=str(session_id))
            LiveTurnEvent.objects.create(turn=turn, seq=1, event=event.name, data=encode(event))
            notify_commit(turn.id)
    except IntegrityError:
        raise TurnConflictError(str(session_id)) from None
    _enqueue(turn)
    logger.info("turn %s queued in session %s", turn.id, session_id)
    return turn


def _enqueue(turn: LiveTurn) -> None:
    from live.tasks import send_live_turn  # loads Celery on the first turn, not at start-up

    try:
        send_live_turn(str(turn.id))
    except Exception as error:  # kombu's OperationalError after the publish retries, a bad URL, ...
        logger.error("turn %s: the broker refused its task (%s)", turn.id, type(error).__name__)
        _fail_queued(turn.id, "queue_unavailable", "The service could not queue this question. Please try again.")
        raise QueueUnavailableError(str(turn.id)) from None


def _fail_queued(turn_id: uuid.UUID, kind: str, message: str) -> None:
    """End a queued turn (no worker holds it) with an `error` event after its `turn` event."""
    event = error_event(kind=kind, message=message)
    with sqlite_write_lock(), transaction.atomic():
        turn = LiveTurn.objects.select_for_update().filter(pk=turn_id, status=LiveTurnStatus.QUEUED).first()
        if turn is None:
            return
        seq = turn.last_seq + 1
        LiveTurnEvent.objects.create(turn_id=turn_id, seq=seq, event=event.name, data=encode(event))
        LiveTurn.objects.filter(pk=turn_id).update(
            status=LiveTurnStatus.FAILED, error=event.data["error"], last_seq=seq, finished_at=timezone.now()
        )
        notify_commit(turn_id)
    _count_failed(turn, kind)


def turn_acquire(turn_id: uuid.UUID) -> uuid.UUID | None:
    """Take `turn_id` for this worker; its new worker token, or None when there is nothing to run.

    Queued: it starts. Running: a redelivered task whose worker died (or lost
    the broker); the turn is taken over from its checkpoint with a new
    token, so the older worker's next write fails, unless it was already
    taken over `LIVE_TURN_MAX_RESUMES` times: then it fails. Done, failed or
    missing: None (a redelivered task of a finished turn is a no-op).
    """
    token = uuid.uuid4()
    with sqlite_write_lock(), transaction.atomic():
        turn = LiveTurn.objects.select_for_update().filter(pk=turn_id).active().first()
        if turn is None:
            return None
        if turn.status == LiveTurnStatus.QUEUED:
            LiveTurn.objects.filter(pk=turn_id).update(
                status=LiveTurnStatus.RUNNING, worker_token=token, started_at=timezone.now()
            )
            return token
        if turn.resume_count < settings.LIVE_TURN_MAX_RESUMES:
            # The log is kept whole: the run goes on after its last id and rewinds
            # what its checkpoint does not hold (live.checkpoint.resume_rewind).
            LiveTurn.objects.filter(pk=turn_id).update(worker_token=token, resume_count=F("resume_count") + 1)
            logger.info("turn %s taken over from a stopped worker", turn_id)
            return token
    logger.warning("turn %s: its workers stopped %d times; it fails", turn_id, turn.resume_count + 1)
    if turn_fail(turn_id, kind="interrupted", message="This answer was interrupted too many times. Please try again."):
        _count_failed(turn, "interrupted")
    return None


def _count_failed(turn: LiveTurn, kind: str) -> None:
    from telemetry import metrics  # with the first failure, not at start-up (docs/metrics.md)

    metrics.turn_finished(outcome="failed", error_type=kind, seconds=(timezone.now() - turn.created_at).total_seconds())


def turns_orphaned_requeue() -> int:
    """Queue again every running turn (the embedded worker's start: no other worker can be running them)."""
    from live.tasks import send_live_turn

    turn_ids = list(LiveTurn.objects.filter(status=LiveTurnStatus.RUNNING).values_list("pk", flat=True))
    for turn_id in turn_ids:
        send_live_turn(str(turn_id))  # a new trace: the POST's context was not kept
    return len(turn_ids)
