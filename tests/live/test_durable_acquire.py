"""Durable turns (issues 10 and 18), acquisition in this process on the test database: of two deliveries of
one turn the later owns it and the earlier cannot write; resumes are capped, then the turn fails."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from django.db import connection

from citations.live_events import text_event
from live.engine import turn_acquire, turn_take
from live.log import LostTurnError, append_event
from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus

pytestmark = pytest.mark.django_db(transaction=True)


# --- acquisition: in this process, on the test database -------------------


def queued_turn(user) -> LiveTurn:
    return LiveTurn.objects.create(session_id=uuid.uuid4(), user=user, user_message="hi", prompt_version="v5")


def test_two_deliveries_race_the_later_owns_the_turn_the_earlier_cannot_write(maya):
    turns = [queued_turn(maya) for _ in range(5)]
    barrier = threading.Barrier(2)
    taken: list[tuple[uuid.UUID, uuid.UUID, float]] = []

    def acquire():
        barrier.wait()
        for turn in turns:
            token = turn_acquire(turn.id)
            assert token is not None
            taken.append((turn.id, token, time.monotonic()))
        connection.close()

    threads = [threading.Thread(target=acquire) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for turn in turns:
        tokens = [token for turn_id, token, _ in taken if turn_id == turn.id]
        row = LiveTurn.objects.get(pk=turn.id)
        # Acquisitions are serialised: one started the turn, the other took it over.
        assert len(set(tokens)) == 2 and row.status == LiveTurnStatus.RUNNING and row.resume_count == 1
        (stale,) = set(tokens) - {row.worker_token}
        with pytest.raises(LostTurnError):
            append_event(turn.id, stale, text_event("late"), after=row.last_seq)
        assert append_event(turn.id, row.worker_token, text_event("ok"), after=row.last_seq) == row.last_seq + 1


def test_a_turn_taken_comes_back_as_the_row_holds_it_started_or_taken_over(maya):
    turn = queued_turn(maya)
    started = turn_take(turn.id)
    row = LiveTurn.objects.get(pk=turn.id)
    assert started is not None and row.status == LiveTurnStatus.RUNNING
    assert (started.status, started.worker_token, started.started_at, started.resume_count) == (
        row.status,
        row.worker_token,
        row.started_at,
        0,
    )
    taken_over = turn_take(turn.id)  # a redelivery: read under its lock, taken over
    row = LiveTurn.objects.get(pk=turn.id)
    assert taken_over is not None and taken_over.worker_token not in (None, started.worker_token)
    assert (taken_over.worker_token, taken_over.resume_count, taken_over.progressed_at) == (
        row.worker_token,
        1,
        row.progressed_at,
    )
    assert taken_over.started_at == started.started_at  # a takeover does not start the turn again


def test_resumes_are_capped_then_the_turn_fails(maya, settings):
    settings.LIVE_TURN_MAX_RESUMES = 2
    turn = queued_turn(maya)
    LiveTurnEvent.objects.create(turn=turn, seq=1, event="turn", data="{}")
    LiveTurn.objects.filter(pk=turn.pk).update(last_seq=1)
    first = turn_acquire(turn.id)
    second, third = turn_acquire(turn.id), turn_acquire(turn.id)  # two redeliveries: two takeovers
    assert None not in (first, second, third) and len({first, second, third}) == 3
    assert LiveTurn.objects.get(pk=turn.pk).resume_count == 2
    assert turn_acquire(turn.id) is None  # the third redelivery: the cap
    row = LiveTurn.objects.get(pk=turn.pk)
    assert row.status == LiveTurnStatus.FAILED and row.error == {
        "type": "interrupted",
        "message": "This answer was interrupted too many times. Please try again.",
    }
    assert list(LiveTurnEvent.objects.filter(turn=turn).values_list("seq", "event")) == [(1, "turn"), (2, "error")]
    assert turn_acquire(turn.id) is None  # a finished turn: a no-op
    assert LiveTurn.objects.get(pk=turn.pk).resume_count == 2
