"""A worker taking a live turn, and the turns no worker will finish (docs/job-engine.md).

- `turn_take(turn_id, task_id)` is where a worker takes a turn (`turn_acquire`:
  its token alone). Only the turn's own task does (its `task_id`): a queued
  turn starts, in one statement that returns the row the worker runs
  (`live.db.claim_queued`); a running one
  (its task redelivered because its worker died) is taken over with a new
  worker token, at most `LIVE_TURN_MAX_RESUMES` times, then it fails; a
  finished one, or a task of another id (stale: the turn was queued again),
  is left alone. The broker redelivers a dead worker's unacknowledged task:
  there is no lease or heartbeat.
- A turn no task will run any more is *stuck* (`turns_stuck`): `queued` for
  `LIVE_TURN_QUEUED_TIMEOUT_SECONDS`, or `running` with no write for
  `LIVE_TURN_STALLED_SECONDS`. `end_stuck` ends it with an `error` event its
  client reads. Admission ends the user's stuck turns before counting them
  (`live.service`), and every worker ends them at its start and every
  `LIVE_TURN_SWEEP_SECONDS` after (`live.sweeps`, which also sends again a
  turn whose task never reached the broker, and, at an embedded worker's
  start, queues again the turns a stopped one held), so every turn ends with
  no request arriving.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from citations.live_events import error_event
from live.db import claim_queued, notify_turn, write_transaction
from live.log import encode, turn_fail
from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus

__all__ = ["end_stuck", "fail_unstarted", "sweep_stuck_turns", "turn_acquire", "turn_take", "turns_stuck"]

logger = logging.getLogger(__name__)

#: What the client of a stuck turn reads (docs/live.md#failures).
STUCK_MESSAGE = "This answer could not be finished. Please try again."


def turn_acquire(turn_id: uuid.UUID, task_id: uuid.UUID | None = None) -> uuid.UUID | None:
    """Take `turn_id` for the task `task_id` (None: whichever task); its new worker token, or None when
    there is nothing to run (`turn_take`)."""
    turn = turn_take(turn_id, task_id)
    return None if turn is None else turn.worker_token


def turn_take(turn_id: uuid.UUID, task_id: uuid.UUID | None = None) -> LiveTurn | None:
    """Take `turn_id` for the task `task_id` (None: whichever task; SPEC 11, docs/job-engine.md): the turn's row
    as taken (`running`, its `worker_token` the new token the worker runs it under), or None when there is
    nothing to run.

    A queued turn is taken in one statement (`live.db.claim_queued`); otherwise the row is read under a lock:
    a running turn (a redelivered task) is taken over, a stale task or an ended turn does nothing, and a turn
    taken over too often fails. Raises the database's errors (`DatabaseError`): the task retries through
    the engine.
    """
    token = uuid.uuid4()
    claimed = claim_queued(turn_id, task_id, token, timezone.now())
    if claimed is not None:
        return claimed
    with write_transaction():
        turn = LiveTurn.objects.select_for_update().filter(pk=turn_id).active().first()
        if turn is None:
            return None
        if task_id is not None and turn.task_id != task_id:
            logger.info("turn %s: a stale task (the turn was queued again) does nothing", turn_id)
            return None
        now = timezone.now()
        if turn.status == LiveTurnStatus.QUEUED:  # queued again between the claim and this read
            started = {"status": LiveTurnStatus.RUNNING, "worker_token": token, "started_at": now, "progressed_at": now}
            LiveTurn.objects.filter(pk=turn_id).update(**started)
            for name, value in started.items():
                setattr(turn, name, value)
            return turn
        if turn.resume_count < settings.LIVE_TURN_MAX_RESUMES:
            # The log is kept whole: the run goes on after its last id and rewinds
            # what its checkpoint does not hold (live.checkpoint.resume_rewind).
            LiveTurn.objects.filter(pk=turn_id).update(
                worker_token=token, resume_count=F("resume_count") + 1, progressed_at=now
            )
            turn.worker_token, turn.resume_count, turn.progressed_at = token, turn.resume_count + 1, now
            logger.info("turn %s taken over from a stopped worker", turn_id)
            return turn
    logger.warning("turn %s: its workers stopped %d times; it fails", turn_id, turn.resume_count + 1)
    if turn_fail(turn_id, kind="interrupted", message="This answer was interrupted too many times. Please try again."):
        count_failed(turn, "interrupted")
    return None


def fail_unstarted(turn_id: uuid.UUID, kind: str, message: str, *, task_id: uuid.UUID | None = None) -> bool:
    """End a queued turn (no worker holds it) with an `error` event after its last one; whether it did.

    `task_id`: only while that task is the turn's own (a task whose start failed); a stale one, after
    the turn was queued again, leaves it to its own task, as `turn_acquire` does.
    """
    event = error_event(kind=kind, message=message)
    with write_transaction():
        turn = LiveTurn.objects.select_for_update().filter(pk=turn_id, status=LiveTurnStatus.QUEUED).first()
        if turn is None:
            return False
        if task_id is not None and turn.task_id != task_id:
            logger.info("turn %s: a stale task (the turn was queued again) does not end it", turn_id)
            return False
        seq = turn.last_seq + 1
        LiveTurnEvent.objects.create(turn_id=turn_id, seq=seq, event=event.name, data=encode(event))
        LiveTurn.objects.filter(pk=turn_id).update(
            status=LiveTurnStatus.FAILED, error=event.data["error"], last_seq=seq, finished_at=timezone.now()
        )
        transaction.on_commit(lambda: notify_turn(turn_id))
    count_failed(turn, kind)
    return True


def turns_stuck(turns: list[LiveTurn], now: dt.datetime | None = None) -> list[LiveTurn]:
    """The turns of `turns` (queued or running) that no task will finish: queued for
    `LIVE_TURN_QUEUED_TIMEOUT_SECONDS`, running with no write for `LIVE_TURN_STALLED_SECONDS`."""
    now = now or timezone.now()
    queued = now - dt.timedelta(seconds=settings.LIVE_TURN_QUEUED_TIMEOUT_SECONDS)
    stalled = now - dt.timedelta(seconds=settings.LIVE_TURN_STALLED_SECONDS)
    return [
        turn
        for turn in turns
        if (turn.status == LiveTurnStatus.QUEUED and turn.created_at < queued)
        or (turn.status == LiveTurnStatus.RUNNING and (turn.progressed_at or turn.created_at) < stalled)
    ]


def end_stuck(turns: list[LiveTurn]) -> int:
    """End each of `turns` (from `turns_stuck`) with an `error` event, `stuck` its type; how many ended."""
    ended = 0
    for turn in turns:
        logger.warning("turn %s: %s past its bound with no task to finish it; it fails", turn.id, turn.status)
        if turn.status == LiveTurnStatus.QUEUED:
            ended += fail_unstarted(turn.id, "stuck", STUCK_MESSAGE)
        elif turn_fail(turn.id, kind="stuck", message=STUCK_MESSAGE):
            count_failed(turn, "stuck")
            ended += 1
    return ended


def sweep_stuck_turns() -> int:
    """End every stuck turn (a worker's start); how many ended."""
    # Their large fields stay in the table: a sweep reads every active turn, a hundred at a time under load.
    return end_stuck(turns_stuck(list(LiveTurn.objects.active().defer("checkpoint", "user_message", "error"))))


def count_failed(turn: LiveTurn, kind: str) -> None:
    from telemetry import metrics  # with the first failure, not at start-up (docs/metrics.md)

    metrics.turn_finished(outcome="failed", error_type=kind, seconds=(timezone.now() - turn.created_at).total_seconds())
