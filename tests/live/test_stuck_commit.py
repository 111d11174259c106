"""No stuck turn (issue 28; docs/job-engine.md#what-a-worker-does-with-a-turn): a POST inside an outer transaction.

A turn's task is sent when its row is committed (`transaction.on_commit`),
so a worker never looks for a turn it cannot see yet (it would find none,
drop the task, and leave the turn `queued`). With the in-process Celery
worker (`live_worker`) running, on the test database, the recorded model:
a POST inside `transaction.atomic()` held open sends no task, and no worker
starts the turn, which no other connection sees; at the commit the task is
sent once and the turn runs to `done`. Rolled back: no turn, no task, and
the session is free.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from django.db import connection, transaction

from chat.models import ChatLog, ChatSession
from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus
from tests.live import live_turns_support
from tests.live.stuck_support import Attempts, post_turn, read_stream, watched_tasks
from tests.live_support import script, step, text

pytestmark = pytest.mark.django_db(transaction=True)


#: maya's API client (tests/live/live_turns_support.py), bound here: it replaces pytest-django's `client`
client = live_turns_support.client


@pytest.fixture
def attempts() -> Iterator[Attempts]:
    with watched_tasks() as seen:
        yield seen


def visible_elsewhere(turn_id: uuid.UUID) -> bool:
    """Whether another connection (a worker's) sees the turn's row."""
    seen: list[bool] = []

    def look() -> None:
        try:
            seen.append(LiveTurn.objects.filter(pk=turn_id).exists())
        finally:
            connection.close()

    thread = threading.Thread(target=look)
    thread.start()
    thread.join(30)
    return seen == [True]


def test_a_post_inside_an_outer_transaction_sends_its_task_at_the_commit(client, recorded_model, attempts):
    recorded_model.load([script(step(text("Sent at the commit.")))])
    session_id = uuid.uuid4()
    with transaction.atomic():
        response = post_turn(client, session_id)
        assert response.status_code == 200
        turn = LiveTurn.objects.get(session_id=session_id)
        # Nothing is published before the commit (on_commit runs there, in this thread), so no worker can
        # have taken anything: checked at once, no wait needed to see nothing happen.
        assert attempts.published == [] and attempts.started == []
        assert not visible_elsewhere(turn.id)
        row = LiveTurn.objects.get(pk=turn.id)
        assert (row.status, row.started_at, row.last_seq) == (LiveTurnStatus.QUEUED, None, 1)
    assert attempts.published == [(str(turn.task_id), 0)]  # at the commit, once
    events = read_stream(response)
    assert events[-1][1] == "done" and events[-1][2]["log_id"] == str(turn.id)
    assert attempts.started == [(str(turn.task_id), 0)]
    turn.refresh_from_db()
    assert (turn.status, turn.resume_count) == (LiveTurnStatus.DONE, 0)
    assert list(ChatLog.objects.values_list("id", "response")) == [(turn.id, "Sent at the commit.")]


def test_a_post_inside_an_outer_transaction_rolled_back_leaves_no_turn_and_sends_no_task(
    client, recorded_model, attempts
):
    session_id = uuid.uuid4()
    with transaction.atomic():
        response = post_turn(client, session_id)
        assert response.status_code == 200
        assert LiveTurn.objects.filter(session_id=session_id).count() == 1
        transaction.set_rollback(True)
    response.close()
    # A rollback drops the on_commit callbacks: nothing was published, so nothing can be taken.
    assert attempts.published == [] and attempts.started == []
    assert LiveTurn.objects.count() == 0 and LiveTurnEvent.objects.count() == 0
    assert not ChatSession.objects.filter(pk=session_id).exists()
    # The session is free: a POST outside a transaction runs at once.
    recorded_model.load([script(step(text("Now.")))])
    assert read_stream(post_turn(client, session_id))[-1][1] == "done"
    assert attempts.published == [(str(LiveTurn.objects.get().task_id), 0)]
