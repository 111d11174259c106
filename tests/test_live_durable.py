"""Durable turns (issues 10 and 18): reconnect, a killed worker's turn finished by another, checkpoints.

Real processes started from the Procfile: web (uvicorn) and worker (Celery)
on the test database, RabbitMQ with a queue of the test's own, the real SDK
against the recorded model over HTTP, a real HTTP client reading SSE.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

import pytest
from django.db import connection
from rest_framework.authtoken.models import Token

from chat.models import ChatLog, LiveTurn, LiveTurnEvent, LiveTurnStatus
from citations.live_events import LOG_ONLY_EVENTS, text_event
from live.engine import turn_acquire
from live.log import LostTurnError, append_event
from tests.live_support import SSEClient, apply_rewind, cite, database_url, script, step, text, tool_use
from tests.procfile import Stack, filesystem_env, rabbitmq_available, rabbitmq_env

pytestmark = pytest.mark.django_db(transaction=True)

CARDS = "silvia://your-account/credit-card"
CHASE = "silvia://credit-card-corpus/chase/sapphire-preferred/pricing.md"


def durable_script(delay_ms: float = 0, *, second_answer: bool = False) -> dict:
    """Two tool rounds; the last step streams slowly when `delay_ms` (time to kill a worker).

    `second_answer`: the last step says something else, as a real model asked again does.
    """
    last = (
        step(
            text("Across two cards you owe $1,500.", cite(CARDS, "account_name: Credit card; balance: 1200")),
            text(" Its annual fee: $95 💳.", cite(CHASE, "- Annual fee: $95", "Sapphire Preferred pricing and terms")),
            text(" That is all."),
        )
        if second_answer
        else step(
            text("You owe $1,500 💳 across two cards.", cite(CARDS, "account_name: Credit card; balance: 300")),
            text(" The fee is $95.", cite(CHASE, "- Annual fee: $95", "Sapphire Preferred pricing and terms")),
        )
    )
    return script(
        step(text("Let me look."), tool_use("toolu_1", "execute_sql", {"query": "cards"})),
        step(
            text("Cards: ", cite(CARDS, "account_name: Credit card; balance: 1200", "Credit card")),
            tool_use("toolu_2", "read_credit_card_document", {"path": "chase/sapphire-preferred/pricing.md"}),
        ),
        {**last, "delay_ms": delay_ms},
    )


def needs_rabbitmq() -> None:
    if not rabbitmq_available():
        if os.environ.get("CI"):
            pytest.fail("RabbitMQ (127.0.0.1:5672) is needed: a killed worker's task is redelivered by it")
        pytest.skip("RabbitMQ is not reachable on 127.0.0.1:5672")


@pytest.fixture
def token(maya):
    return Token.objects.create(user=maya).key


def base_env(recorded_model_server) -> dict[str, str]:
    return {
        "DATABASE_URL": database_url(),
        "ANTHROPIC_BASE_URL": recorded_model_server.base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "LIVE_TOOL_FACTORIES": "tests.live_support.recorded_sql_tool",
        "LIVE_TURN_POLL_SECONDS": "0.05",
    }


@pytest.fixture
def stack(recorded_model_server, tmp_path):
    """Processes on RabbitMQ (a killed worker's task goes to another worker)."""
    needs_rabbitmq()
    recorded_model_server.load([])
    processes = Stack({**base_env(recorded_model_server), **rabbitmq_env()}, tmp_path)
    yield processes
    processes.close()


@pytest.fixture
def embedded(recorded_model_server, tmp_path):
    """Processes on the embedded broker (kombu's filesystem transport), as `make run` starts them."""
    recorded_model_server.load([])
    processes = Stack({**base_env(recorded_model_server), **filesystem_env(tmp_path / "broker")}, tmp_path)
    yield processes
    processes.close()


def normalized(events):
    """Events without their ids and the per-turn ids (turn, log and session ids), to compare two runs of one script.

    Consecutive `text` events are joined: a worker merges the text that came
    within one write (docs/live.md#how-a-turn-runs-the-event-log-checkpoints-resume), so where one text event
    ends depends on timing; what the events say, in order, does not.
    """
    out: list[tuple[str, object]] = []
    for _, name, data in events:
        if name in ("turn", "done"):
            data = {k: v for k, v in data.items() if k not in ("turn_id", "session_id", "log_id")}
        if name == "message":
            data = {k: v for k, v in data.items() if k != "id"}
        if name == "text" and out and out[-1][0] == "text":
            data = {"text": out.pop()[1]["text"] + data["text"]}  # type: ignore[index]
        out.append((name, data))
    return out


def logged_ids(events) -> bool:
    """The client's ids are exactly its turn's log's ids but those of the log-only events (which our stream
    never sends: docs/live.md#log-only-events), in order: nothing lost, nothing repeated."""
    turn_id = events[0][2]["turn_id"]
    logged = LiveTurnEvent.objects.filter(turn_id=turn_id).exclude(event__in=LOG_ONLY_EVENTS).order_by("seq")
    return [seq for seq, _, _ in events] == list(logged.values_list("seq", flat=True))


def stored(log_id):
    row = ChatLog.objects.get(pk=log_id)
    return {"response": row.response, "citations": row.citations, "inline": row.inline_citations, "model": row.model}


def uninterrupted(web, token):
    client = SSEClient(web.base_url, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "cards?"})
    events = client.events()
    client.close()
    assert events[-1][1] == "done", events[-1]
    return events


def test_disconnect_after_n_events_and_reconnect(embedded, token, recorded_model_server):
    recorded_model_server.load([durable_script(delay_ms=2)])
    web = embedded.stream()
    embedded.worker()
    reference = uninterrupted(web, token)
    total = len(reference)
    for n in range(1, total):
        post = SSEClient(
            web.base_url, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "cards?"}
        )
        first = post.events(limit=n)
        post.close()  # the client goes away; the turn goes on
        turn_id = first[0][2]["turn_id"]
        again = SSEClient(
            web.base_url,
            "GET",
            f"/api/chat/turns/{turn_id}/events",
            token,
            headers={"Last-Event-ID": str(first[-1][0])},
        )
        rest = again.events()
        again.close()
        seen = first + rest
        assert normalized(seen) == normalized(reference), n
        assert logged_ids(seen), n
        assert stored(seen[-1][2]["log_id"]) == stored(reference[-1][2]["log_id"])
        # ?after= works the same as the header, and a finished turn replays and closes.
        replay = SSEClient(web.base_url, "GET", f"/api/chat/turns/{turn_id}/events?after=0", token)
        assert replay.events() == seen
        replay.close()


def test_reconnect_served_by_a_second_web_process(embedded, token, recorded_model_server):
    recorded_model_server.load([durable_script(delay_ms=40)])
    first_web, second_web = embedded.stream(), embedded.stream()
    embedded.worker()
    post = SSEClient(first_web.base_url, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "?"})
    first = post.events(limit=4)
    post.close()
    follow = SSEClient(
        second_web.base_url,
        "GET",
        f"/api/chat/turns/{first[0][2]['turn_id']}/events",
        token,
        headers={"Last-Event-ID": str(first[-1][0])},
    )
    rest = follow.events()
    follow.close()
    assert rest[-1][1] == "done"
    assert logged_ids(first + rest)
    recorded_model_server.load([durable_script()])
    assert normalized(first + rest) == normalized(uninterrupted(first_web, token))


def wait_for(condition, timeout: float = 60.0, what: str = "a condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


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
    """The filesystem transport has no redelivery: a new embedded worker queues its dead predecessor's turns again."""
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
