"""Celery tasks (docs/job-engine.md): found by `silvia.celery`'s autodiscovery."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import DatabaseError

from telemetry import tracing

logger = logging.getLogger(__name__)


def _task_id(value: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


# A shared task binds to the app the process configured (`silvia.celery`, loaded by the
# worker's `-A silvia.celery` and by the web entry points `silvia.asgi`/`silvia.wsgi`):
# `live` does not import `silvia` (apps import one way, tests/project/test_layering.py).
@shared_task(name="chat.run_live_turn", bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_live_turn(self: Any, turn_id: str) -> None:
    """Take the turn and run it to its end; idempotent under redelivery.

    A queued turn starts; a running one (its message redelivered after its
    worker died) resumes from its checkpoint with a new worker token, so the
    old worker's writes fail; a finished one, or a task that is not the
    turn's own (`task_id`), is a no-op. When the database refuses the start
    (down for a moment) the engine retries it, `LIVE_TURN_START_RETRIES`
    times with a growing countdown, then the turn fails with an `error` event,
    and while the database refuses that too the task is retried every 30 s
    until the turn starts or fails; any other
    error before the start fails it (a stale task's failure leaves the turn
    to its own task). It raises only Celery's `Retry`. The
    run is the trace's `process` span, under the `send` span whose context
    came in the message's headers (docs/metrics.md#traces).
    """
    turn_uuid = _task_id(turn_id)
    if turn_uuid is None:
        logger.error("a task named no turn: ignored")
        return
    request = self.request
    with tracing.task_process(run_live_turn.name, headers=request.headers, attributes=_messaging(request.id, turn_id)):
        _start_and_run(self, turn_uuid)


def _start_and_run(task: Any, turn_uuid: uuid.UUID) -> None:
    from live.engine import turn_take
    from live.runner import run_turn

    self = task
    task_id = _task_id(self.request.id)
    try:
        turn = turn_take(turn_uuid, task_id)
    except DatabaseError as error:
        retries = self.request.retries
        if retries < settings.LIVE_TURN_START_RETRIES:
            logger.warning("turn %s: the database refused its start (%s); retrying", turn_uuid, type(error).__name__)
            raise self.retry(countdown=min(2**retries, 30), max_retries=settings.LIVE_TURN_START_RETRIES) from None
        logger.error("turn %s: the database refused its start %d times; it fails", turn_uuid, retries + 1)
        if not _fail_quietly(turn_uuid, task_id, "database_unavailable"):
            # Still refused: neither started nor failed, so try again until one of the two is written.
            raise self.retry(countdown=30, max_retries=None) from None
        return
    except Exception as error:  # our bug: the turn must not wait for ever
        logger.error("turn %s: its start failed (%s)", turn_uuid, type(error).__name__)
        _fail_quietly(turn_uuid, task_id, "internal_error")
        return
    if turn is not None:
        run_turn(turn_uuid, turn.worker_token, turn=turn)


def _fail_quietly(turn_id: uuid.UUID, task_id: uuid.UUID | None, kind: str) -> bool:
    """End the queued turn with an `error` event, only while this task is its own (a stale task's start
    failing leaves the turn to its own task); False when the database refused that too."""
    from live.engine import fail_unstarted

    try:
        fail_unstarted(turn_id, kind, "This answer could not be started. Please try again.", task_id=task_id)
    except Exception as error:  # the database is still gone
        logger.error("turn %s: could not be marked failed (%s)", turn_id, type(error).__name__)
        return False
    return True


def send_live_turn(turn_id: str, task_id: str) -> None:
    """Queue the turn's task `task_id`, with this thread's trace context in its headers (a `send` span around
    it). Raises what the broker raises (kombu's `OperationalError` after the publish retries, ...)."""
    with tracing.task_send(run_live_turn.name, attributes=_messaging(task_id, turn_id)) as headers:
        run_live_turn.apply_async((turn_id,), task_id=task_id, headers=headers)


def _messaging(task_id: str | None, turn_id: str) -> dict[str, str]:
    """The `send` and `process` spans' attributes: the broker's kind (never its URL, which holds a password),
    the queue, the task's id and the turn's."""
    conf = run_live_turn.app.conf
    return {
        "messaging.system": tracing.messaging_system(str(conf.broker_url)),
        "messaging.destination.name": str(conf.task_default_queue),
        "messaging.message.id": str(task_id),
        "silvia.turn.id": turn_id,
    }
