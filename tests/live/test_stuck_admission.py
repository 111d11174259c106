"""No stuck turn (issue 28; docs/job-engine.md#stuck-turns): stuck turns ended at their user's next admission.

The Procfile's `stream` and `worker` processes on the test database, the
embedded broker, the recorded model, a real HTTP client reading SSE. A turn
`running` whose worker was killed (the embedded broker redelivers nothing)
with no write for `LIVE_TURN_STALLED_SECONDS`, and one `queued` with no
worker past `LIVE_TURN_QUEUED_TIMEOUT_SECONDS`: a new POST of their user,
in the same session (no 409) or at `LIVE_TURN_MAX_PER_USER` (no 429), is
admitted and they end with an `error` event `stuck` their streams deliver;
within its bound a turn is left alone, and 409/429 stand. The turns are
made for real; only their clocks are moved back past the default bounds
(`backdate`), as if the test had waited that long.
"""

from __future__ import annotations

import uuid

import pytest
from django.conf import settings

from live.models import LiveTurnStatus
from tests.live.stuck_support import STUCK, Turn, backdate, consecutive, env_for, post, slow_answer, token_for, wait_for
from tests.procfile import Stack, embedded_env

pytestmark = pytest.mark.django_db(transaction=True)


def test_stuck_turns_end_at_their_users_next_admission_no_409_no_429(recorded_model_server, tmp_path):
    recorded_model_server.load([slow_answer()])
    stack = Stack(
        env_for(recorded_model_server, embedded_env(tmp_path / "broker"), LIVE_TURN_MAX_PER_USER="2"), tmp_path
    )
    try:
        web, doomed = stack.stream(), stack.worker()
        maya, bo = token_for("maya"), token_for("bo")
        # maya's turn runs, then its worker dies: `running`, and the embedded broker redelivers nothing.
        stalled = Turn(web, maya)
        wait_for(lambda: stalled.row().last_seq >= 3, "the turn to stream")
        doomed.kill()
        stalled_seq = stalled.row().last_seq
        # bo's two turns wait for a worker that is not there.
        lost, waiting = Turn(web, bo), Turn(web, bo)

        # Within their bounds nothing is ended: 409 in maya's session, 429 for bo at his limit.
        assert post(web, maya, stalled.session_id) == (409, {"detail": "This session already has a turn running."})
        assert post(web, bo, uuid.uuid4()) == (
            429,
            {"detail": "You already have 2 answers in progress. Wait for one to finish."},
        )
        assert [t.row().status for t in (stalled, lost, waiting)] == ["running", "queued", "queued"]

        backdate(stalled, "progressed_at", settings.LIVE_TURN_STALLED_SECONDS + 1)
        backdate(lost, "created_at", settings.LIVE_TURN_QUEUED_TIMEOUT_SECONDS + 1)
        backdate(waiting, "created_at", settings.LIVE_TURN_QUEUED_TIMEOUT_SECONDS - 60)

        # maya's session takes a new turn: the stalled one ends first, its stream with it.
        again = Turn(web, maya, stalled.session_id)
        assert again.id != stalled.id and again.row().status == LiveTurnStatus.QUEUED
        events = stalled.rest()
        assert events[-1] == (stalled_seq + 1, "error", {"error": STUCK}) and consecutive(events)
        row = stalled.row()
        assert (row.status, row.error, row.last_seq) == (LiveTurnStatus.FAILED, STUCK, stalled_seq + 1)

        # bo, at his limit with one stuck turn, is admitted; his turn within its bound is left alone.
        third = Turn(web, bo)
        assert lost.rest() == [(1, "turn", lost.read[0][2]), (2, "error", {"error": STUCK})]
        assert (lost.row().status, lost.row().error) == (LiveTurnStatus.FAILED, STUCK)
        row = waiting.row()
        assert (row.status, row.error, row.last_seq, row.finished_at) == (LiveTurnStatus.QUEUED, None, 1, None)
        # Two turns within their bounds: the limit holds.
        assert post(web, bo, uuid.uuid4())[0] == 429
        assert third.row().status == LiveTurnStatus.QUEUED
        for turn in (waiting, again, third):
            turn.client.close()
    finally:
        stack.close()


def test_turns_stuck_in_the_queue_do_not_fill_it_for_everyone(recorded_model_server, tmp_path):
    stack = Stack(env_for(recorded_model_server, embedded_env(tmp_path / "broker"), LIVE_TURN_MAX_QUEUED="2"), tmp_path)
    try:
        web = stack.stream()  # no worker: bo's turns wait, their messages in the broker's folder
        maya, bo = token_for("maya"), token_for("bo")
        old, older = Turn(web, bo), Turn(web, bo)
        full = (503, {"detail": "Too many questions are waiting for an answer. Please try again shortly."})
        assert post(web, maya, uuid.uuid4()) == full
        backdate(old, "created_at", settings.LIVE_TURN_QUEUED_TIMEOUT_SECONDS - 60)
        assert post(web, maya, uuid.uuid4()) == full  # one turn within its bound still waits
        backdate(older, "created_at", settings.LIVE_TURN_QUEUED_TIMEOUT_SECONDS + 1)
        # A turn stuck in the queue waits for no worker: it does not count. (It is bo's: his next admission,
        # or a worker's start, ends it.)
        mine = Turn(web, maya)
        assert mine.row().status == LiveTurnStatus.QUEUED
        assert [older.row().status, old.row().status] == [LiveTurnStatus.QUEUED, LiveTurnStatus.QUEUED]
        assert post(web, maya, uuid.uuid4()) == full  # two within their bounds: full again
        for turn in (old, older, mine):
            turn.client.close()
    finally:
        stack.close()
