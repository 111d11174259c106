"""Durable turns (issues 10 and 18): a killed worker's turn finished by another from its checkpoint (old and
malformed checkpoints too), an embedded worker restarted resuming its predecessor's turns, and a client that
read past the checkpoint rewound when the model answers otherwise.

Real processes started from the Procfile: web (uvicorn) and worker (Celery) on the test database, RabbitMQ
with a queue of the test's own, the real SDK against the recorded model over HTTP, a real HTTP client
reading SSE."""

from __future__ import annotations

import time
import uuid

import pytest

from chat.models import ChatLog
from citations.live_events import LOG_ONLY_EVENTS
from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus
from tests.live.live_durable_support import (
    CARDS,
    base_env,
    durable_script,
    needs_rabbitmq,
    normalized,
    stored,
    uninterrupted,
    wait_for,
)
from tests.live_support import SSEClient, apply_rewind
from tests.procfile import Stack, rabbitmq_env

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def stack(recorded_model_server, tmp_path):
    """Processes on RabbitMQ (a killed worker's task goes to another worker)."""
    needs_rabbitmq()
    recorded_model_server.load([])
    processes = Stack({**base_env(recorded_model_server), **rabbitmq_env()}, tmp_path)
    yield processes
    processes.close()


def crash_after_tool_rounds(web, worker, token, rounds: int, turns: int = 1) -> list[uuid.UUID]:
    """Start `turns` turns, SIGKILL their worker once each has a checkpoint after `rounds` tool rounds."""
    clients = [
        SSEClient(web.base_url, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "cards?"})
        for _ in range(turns)
    ]
    turn_ids = [uuid.UUID(client.events(limit=1)[0][2]["turn_id"]) for client in clients]

    def checkpointed() -> bool:
        checkpoints = LiveTurn.objects.filter(pk__in=turn_ids).values_list("checkpoint", flat=True)
        return all(isinstance(c, dict) and c.get("step", 0) >= rounds for c in checkpoints)

    wait_for(checkpointed, what="the checkpoints")
    worker.kill()
    for client in clients:
        client.close()
    for turn in LiveTurn.objects.filter(pk__in=turn_ids):
        assert turn.status == LiveTurnStatus.RUNNING and not ChatLog.objects.filter(pk=turn.pk).exists()
    return turn_ids


def log_events(turn_id):
    """What a client of our stream reads of the whole log (its log-only events are never sent)."""
    from live.sse import format_sse
    from tests.live_support import parse_sse

    logged = LiveTurnEvent.objects.filter(turn_id=turn_id).exclude(event__in=LOG_ONLY_EVENTS)
    rows = logged.order_by("seq").values_list("seq", "event", "data")
    return parse_sse(b"".join(format_sse(*row) for row in rows))


def test_sigkill_after_a_tool_round_another_worker_finishes_the_turns(stack, token, recorded_model_server):
    """Three turns killed after their second tool round: one as it was, one whose checkpoint has no
    `citationTargets` (written before targets existed), one with a malformed entry."""
    recorded_model_server.load([durable_script()])
    web, doomed = stack.stream(), stack.worker()
    reference = uninterrupted(web, token)
    recorded_model_server.load([durable_script(delay_ms=300)])
    plain, without_targets, malformed = crash_after_tool_rounds(web, doomed, token, rounds=2, turns=3)
    killed_at = time.monotonic()
    turn = LiveTurn.objects.get(pk=without_targets)
    assert isinstance(turn.checkpoint, dict)
    del turn.checkpoint["citationTargets"]
    turn.save(update_fields=["checkpoint"])
    turn = LiveTurn.objects.get(pk=malformed)
    assert isinstance(turn.checkpoint, dict)
    turn.checkpoint["citationTargets"][CARDS] = {"kind": "account"}  # no accountId
    turn.save(update_fields=["checkpoint"])
    recorded_model_server.load([durable_script()])
    stack.worker()  # RabbitMQ gives it the dead worker's unacknowledged tasks: no cron, no client
    ids = (plain, without_targets, malformed)
    wait_for(lambda: LiveTurn.objects.filter(pk__in=ids, status=LiveTurnStatus.DONE).count() == 3, what="resumes")
    assert time.monotonic() - killed_at < 90
    for turn in LiveTurn.objects.filter(pk__in=ids):
        assert turn.resume_count == 1 and turn.checkpoint is None
    assert stored(plain) == stored(reference[-1][2]["log_id"])
    # A client reading its whole log (rewinds applied) holds the uninterrupted run's events; only the
    # ids differ when the killed worker had sent events past its checkpoint (ids are never reused).
    assert normalized(log_events(plain)) == normalized(reference)

    first, second, third = stored(without_targets)["inline"]
    assert first["target"]["kind"] == "accounts"  # streamed before the crash, typed
    assert "target" not in second and "target" not in third  # after the resume: an empty registry

    row = stored(malformed)
    assert "target" not in row["inline"][1]  # the malformed source
    assert row["inline"][2]["target"] == {"kind": "card_document", "url": None}  # the others keep theirs


def test_embedded_worker_restarted_resumes_what_the_dead_one_ran(embedded, token, recorded_model_server):
    """The embedded transport has no redelivery: a new embedded worker queues its dead predecessor's turns again."""
    recorded_model_server.load([durable_script(delay_ms=150)])
    web, doomed = embedded.stream(), embedded.worker()
    (turn_id,) = crash_after_tool_rounds(web, doomed, token, rounds=1)
    recorded_model_server.load([durable_script()])
    embedded.worker()
    wait_for(lambda: LiveTurn.objects.get(pk=turn_id).status == LiveTurnStatus.DONE, what="the resumed turn")
    assert LiveTurn.objects.get(pk=turn_id).resume_count == 1
    client = SSEClient(web.base_url, "GET", f"/api/chat/turns/{turn_id}/events", token, headers={"Last-Event-ID": "1"})
    assert client.events()[-1][1] == "done"
    client.close()


def read_past_the_checkpoint(post: SSEClient, turn_id: uuid.UUID, held: list) -> int:
    """Read events until the client holds two past the checkpoint after the second tool round; its eventSeq."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        held += post.events(limit=1)
        checkpoint = LiveTurn.objects.get(pk=turn_id).checkpoint
        if checkpoint and checkpoint["step"] >= 2 and held[-1][0] >= checkpoint["eventSeq"] + 2:
            return checkpoint["eventSeq"]
    raise AssertionError("the turn did not stream past its checkpoint")


def check_client_equals_row(held, turn_id):
    row = ChatLog.objects.get(pk=turn_id)
    assert "".join(data["text"] for _, name, data in held if name == "text") == row.response
    assert [data["citation"] for _, name, data in held if name == "citation"] == row.inline_citations
    assert [data for _, name, data in held if name == "citations_summary"] == [{"citations": row.citations}]
    assert held[-1][1] == "done" and held[-1][2]["log_id"] == str(turn_id)


def test_killed_after_the_client_read_past_the_checkpoint_a_different_answer_rewinds(
    stack, token, recorded_model_server
):
    recorded_model_server.load([durable_script(delay_ms=150)])
    web, doomed = stack.stream(), stack.worker()
    post = SSEClient(web.base_url, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "cards?"})
    first = post.events(limit=1)
    turn_id = uuid.UUID(first[0][2]["turn_id"])
    checkpoint_seq = read_past_the_checkpoint(post, turn_id, first)
    doomed.kill()
    post.close()
    old_text = "".join(data["text"] for _, name, data in first if name == "text")
    assert old_text.startswith("Let me look.\n\nCards: \n\nYou owe")  # the first answer, cut short
    # Asked again, the model answers differently; RabbitMQ gives the task to the next worker.
    recorded_model_server.load([durable_script(second_answer=True)])
    stack.worker()
    second_web = stack.stream()
    # The client reconnects where it stopped, to another web process.
    again = SSEClient(
        second_web.base_url,
        "GET",
        f"/api/chat/turns/{turn_id}/events",
        token,
        headers={"Last-Event-ID": str(first[-1][0])},
    )
    rest = again.events()
    again.close()
    replay = SSEClient(second_web.base_url, "GET", f"/api/chat/turns/{turn_id}/events?after=0", token)
    from_start = replay.events()
    replay.close()
    # Ids go on after the highest id sent; the first event after the resume rewinds to the checkpoint.
    rewind = rest[0]
    assert rewind[1] == "rewind" and rewind[0] == first[-1][0] + 1
    assert rewind[2] == {"to": checkpoint_seq, "answer": "Let me look.\n\nCards: "}
    assert [seq for seq, _, _ in rest] == list(range(rewind[0], rewind[0] + len(rest)))
    held = apply_rewind(first + rest)
    check_client_equals_row(held, turn_id)
    assert ChatLog.objects.get(pk=turn_id).response == (
        "Let me look.\n\nCards: \n\nAcross two cards you owe $1,500. Its annual fee: $95 💳. That is all."
    )
    # Without the rewind the client would hold a mix of the two answers.
    text_read = "".join(data["text"] for _, name, data in first + rest if name == "text")
    assert text_read != "".join(data["text"] for _, name, data in held if name == "text")
    assert apply_rewind(from_start) == held  # a client reading the whole log from the start ends the same
    turn = LiveTurn.objects.get(pk=turn_id)
    assert turn.status == LiveTurnStatus.DONE and turn.resume_count == 1
