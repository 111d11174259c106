"""Every turn ends with no request arriving (SPEC 11, issue 38 items 2 and 3; docs/job-engine.md#the-workers-sweep).

The Procfile's `stream` and `worker` processes (tests/procfile.py) on the test database (SQLite or
PostgreSQL), the recorded model over HTTP, real HTTP clients reading SSE, processes killed for real:

- **a send lost with its process**: the stream process is SIGKILLed between its turn's commit and the
  publish of its task (the test-only pause `LIVE_TURN_TEST_PAUSE_BEFORE_SEND_SECONDS`); a running worker's
  sweep sends the turn again under a new task id and it is `done`, stored once, read whole from another
  stream process;
- **a turn past its bound**: its worker hangs (SIGSTOP: alive, holding its task, writing nothing), and a
  second worker's periodic sweep ends the turn within a sweep of `LIVE_TURN_STALLED_SECONDS`; the client's
  open stream ends with the `error` `stuck` on its own.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import time
import uuid

import pytest

from chat.models import ChatLog
from live.models import LiveTurn, LiveTurnStatus
from tests.live.stuck_support import (
    Turn,
    consecutive,
    env_for,
    needs_rabbitmq,
    quick_answer,
    slow_answer,
    token_for,
    wait_for,
)
from tests.live_support import SSEClient
from tests.procfile import Stack, embedded_env, rabbitmq_env

pytestmark = pytest.mark.django_db(transaction=True)

SWEEPS = {"LIVE_TURN_SWEEP_SECONDS": "0.5", "LIVE_TURN_RESEND_AFTER_SECONDS": "1"}


def test_a_turn_whose_send_died_with_its_process_is_sent_again_by_a_workers_sweep(recorded_model_server, tmp_path):
    recorded_model_server.load([quick_answer("Sent again by the sweep.")])
    stack = Stack(env_for(recorded_model_server, embedded_env(tmp_path / "broker"), **SWEEPS), tmp_path)
    posting = None
    try:
        worker = stack.worker()
        doomed = stack.stream(LIVE_TURN_TEST_PAUSE_BEFORE_SEND_SECONDS="120")
        token, session_id = token_for("maya"), uuid.uuid4()
        posting = http.client.HTTPConnection("127.0.0.1", doomed.port, timeout=30)
        posting.request(
            "POST",
            f"/api/chat/sessions/{session_id}/turns/",
            body=json.dumps({"message": "How much do I owe?"}),
            headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        )
        wait_for(lambda: LiveTurn.objects.filter(session_id=session_id).exists(), "the turn's commit")
        lost = LiveTurn.objects.get(session_id=session_id)
        assert (lost.status, lost.sent_at) == (LiveTurnStatus.QUEUED, None)
        doomed.kill()  # between the commit and the publish: no task anywhere

        wait_for(lambda: LiveTurn.objects.get(pk=lost.pk).status == LiveTurnStatus.DONE, "the turn to be done")
        row = LiveTurn.objects.get(pk=lost.pk)
        assert row.task_id != lost.task_id and row.sent_at is not None and row.resume_count == 0
        assert worker.output().count("its task never reached the broker; sent again") == 1
        assert list(ChatLog.objects.values_list("id", flat=True)) == [lost.pk]

        reader = SSEClient(stack.stream().base_url, "GET", f"/api/chat/turns/{lost.pk}/events/", token)
        events = reader.events(timeout=30)
        reader.close()
        assert events[-1][1] == "done" and consecutive(events)
        assert "".join(data["text"] for _, name, data in events if name == "text") == "Sent again by the sweep."
    finally:
        if posting is not None:
            posting.close()
        stack.close()


def test_a_turn_past_its_bound_is_ended_by_a_workers_sweep_and_its_open_stream_ends(recorded_model_server, tmp_path):
    needs_rabbitmq()  # a worker that hangs keeps its task (RabbitMQ gives it to no one else)
    recorded_model_server.load([slow_answer()])
    bound = 3
    env = env_for(recorded_model_server, rabbitmq_env(), LIVE_TURN_STALLED_SECONDS=str(bound), **SWEEPS)
    stack = Stack(env, tmp_path)
    hung = None
    try:
        web, hung = stack.stream(), stack.worker()
        turn = Turn(web, token_for("maya"))
        wait_for(lambda: turn.row().last_seq >= 3, "the turn to stream")
        os.killpg(hung.process.pid, signal.SIGSTOP)  # alive and holding its task, writing nothing
        stalled_at = time.monotonic()
        stack.worker()  # its sweeps, not a request, end the turn
        events = turn.rest()
        waited = time.monotonic() - stalled_at
        assert events[-1][1] == "error" and events[-1][2]["error"]["type"] == "stuck", events[-3:]
        assert consecutive(events)
        # Within the bound, a sweep's interval and the second worker's start (a generous margin for CI).
        assert bound - 0.5 < waited < bound + 30, waited
        assert turn.row().status == LiveTurnStatus.FAILED
        assert ChatLog.objects.count() == 0
    finally:
        if hung is not None and hung.process.poll() is None:
            os.killpg(hung.process.pid, signal.SIGKILL)
            hung.process.wait(30)
        stack.close()
