"""Celery tasks (docs/job-engine.md): found by `silvia.celery`'s autodiscovery."""

from __future__ import annotations

import uuid

from celery import shared_task

from telemetry import tracing


# A shared task binds to the app the process configured (`silvia.celery`, loaded by the
# worker's `-A silvia.celery` and by the web entry points `silvia.asgi`/`silvia.wsgi`):
# `chat` does not import `silvia` (apps import one way, tests/test_layering.py).
@shared_task(name="chat.run_live_turn", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_live_turn(turn_id: str) -> None:
    """Take the turn and run it to its end; idempotent under redelivery.

    A queued turn starts; a running one (its message redelivered after its
    worker died) resumes from its checkpoint with a new worker token, so the
    old worker's writes fail; a finished one is a no-op. The same function
    runs on RabbitMQ in production and on the embedded filesystem broker.
    The run is the trace's `process` span, under the `send` span whose
    context came in the message's headers (docs/metrics.md#traces).
    """
    from live.runner import run_turn
    from live.service import turn_acquire

    request = run_live_turn.request
    with tracing.task_process(run_live_turn.name, headers=request.headers, attributes=_messaging(request.id, turn_id)):
        turn_uuid = uuid.UUID(turn_id)
        token = turn_acquire(turn_uuid)
        if token is not None:
            run_turn(turn_uuid, token)


def send_live_turn(turn_id: str) -> None:
    """Queue the turn's task, with this thread's trace context in its headers (a `send` span around it).
    Raises what the broker raises (kombu's `OperationalError` after the publish retries, ...)."""
    task_id = str(uuid.uuid4())  # Celery's own choice, made here so that the `send` span can name it
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
