"""SIGKILL of the stream process that serves a turn's POST, then of the worker running it, in one turn: the turn
finishes on another worker and a client that reconnects to another stream process with `Last-Event-ID`, rewinds
applied, holds the stored row (docs/live.md#reconnecting, docs/job-engine.md).

The Procfile's processes on the test database and RabbitMQ, the recorded model streaming slowly, a real
HTTP client reading SSE.
"""

from __future__ import annotations

import uuid

import pytest

from live.models import LiveTurn, LiveTurnStatus
from tests.live.live_durable_support import base_env, durable_script, needs_rabbitmq, wait_for
from tests.live.test_durable_resume import check_client_equals_row
from tests.live_support import SSEClient, apply_rewind
from tests.procfile import Stack, rabbitmq_env

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_stream_process_then_the_worker_killed_mid_turn(recorded_model_server, token, tmp_path):
    needs_rabbitmq()
    recorded_model_server.load([durable_script(delay_ms=150)])
    stack = Stack({**base_env(recorded_model_server), **rabbitmq_env()}, tmp_path)
    try:
        doomed_stream, other_stream, doomed_worker = stack.stream(), stack.stream(), stack.worker()
        post = SSEClient(
            doomed_stream.base_url, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "cards?"}
        )
        held = post.events(limit=3)
        turn_id = uuid.UUID(held[0][2]["turn_id"])
        doomed_stream.kill()
        post.close()

        def checkpointed() -> bool:
            checkpoint = LiveTurn.objects.get(pk=turn_id).checkpoint
            return isinstance(checkpoint, dict) and checkpoint.get("step", 0) >= 2

        wait_for(checkpointed, what="the second checkpoint")

        def streamed_past_it() -> bool:  # the last step has streamed a little past the checkpoint
            turn = LiveTurn.objects.get(pk=turn_id)
            return isinstance(turn.checkpoint, dict) and turn.last_seq > int(turn.checkpoint.get("eventSeq", 0)) + 1

        wait_for(streamed_past_it, what="events past the second checkpoint")
        doomed_worker.kill()
        recorded_model_server.load([durable_script(second_answer=True)])
        stack.worker()
        again = SSEClient(
            other_stream.base_url,
            "GET",
            f"/api/chat/turns/{turn_id}/events",
            token,
            headers={"Last-Event-ID": str(held[-1][0])},
        )
        assert again.status == 200
        held += again.events()
        again.close()
        assert held[-1][1] == "done", held[-3:]
        turn = LiveTurn.objects.get(pk=turn_id)
        assert (turn.status, turn.resume_count) == (LiveTurnStatus.DONE, 1)
        check_client_equals_row(apply_rewind(held), turn_id)
        ids = [seq for seq, _, _ in held]
        assert ids == sorted(set(ids)), "an event was sent twice or out of order"
    finally:
        stack.close()
