"""Celery tasks (docs/job-engine.md): found by `silvia.celery`'s autodiscovery."""

from __future__ import annotations

import uuid

from celery import shared_task


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
    """
    from live.runner import run_turn
    from live.service import turn_acquire

    turn_uuid = uuid.UUID(turn_id)
    token = turn_acquire(turn_uuid)
    if token is not None:
        run_turn(turn_uuid, token)
