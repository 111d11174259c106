"""Durable turns (issue 10): reconnect, resume after SIGKILL, checkpoints, racing resumers.

Real processes: uvicorn servers on the test database, the real SDK against
the recorded model over HTTP, a real HTTP client reading SSE.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.authtoken.models import Token

from chat.live.service import start_worker, turn_claim_stale, wait_for_workers
from chat.models import ChatLog, LiveTurn
from tests.live_support import ServerProcess, SSEClient, apply_rewind, cite, parse_sse, script, step, text, tool_use

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


@pytest.fixture
def token(maya):
    return Token.objects.create(user=maya).key


@pytest.fixture
def server_env(recorded_model):
    return {
        "ANTHROPIC_BASE_URL": recorded_model.base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "LIVE_TOOL_FACTORIES": "tests.live_support.recorded_sql_tool",
        "LIVE_TURN_POLL_SECONDS": "0.05",
        "LIVE_TURN_HEARTBEAT_SECONDS": "0.5",
    }


@pytest.fixture
def server(server_env):
    process = ServerProcess(server_env)
    yield process
    process.stop()


def normalized(events):
    """Events without the per-turn ids (turn, log and session ids), to compare two runs of one script."""
    out = []
    for seq, name, data in events:
        if name in ("turn", "done"):
            data = {k: v for k, v in data.items() if k not in ("turn_id", "session_id", "log_id")}
        if name == "message":
            data = {k: v for k, v in data.items() if k != "id"}
        out.append((seq, name, data))
    return out


def stored(log_id):
    row = ChatLog.objects.get(pk=log_id)
    return {"response": row.response, "citations": row.citations, "inline": row.inline_citations, "model": row.model}


def uninterrupted(server, token):
    client = SSEClient(
        server.base_url, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "cards?"}
    )
    events = client.events()
    client.close()
    assert events[-1][1] == "done", events[-1]
    return events


def test_disconnect_after_n_events_and_reconnect(server, token, recorded_model):
    recorded_model.load([durable_script(delay_ms=2)])
    reference = uninterrupted(server, token)
    total = len(reference)
    for n in range(1, total):
        post = SSEClient(
            server.base_url, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "cards?"}
        )
        first = post.events(limit=n)
        post.close()  # the client goes away; the turn goes on
        turn_id = first[0][2]["turn_id"]
        again = SSEClient(
            server.base_url,
            "GET",
            f"/api/chat/turns/{turn_id}/events",
            token,
            headers={"Last-Event-ID": str(first[-1][0])},
        )
        rest = again.events()
        again.close()
        seen = first + rest
        assert normalized(seen) == normalized(reference), n
        assert stored(seen[-1][2]["log_id"]) == stored(reference[-1][2]["log_id"])
        # ?after= works the same as the header, and a finished turn replays and closes.
        replay = SSEClient(server.base_url, "GET", f"/api/chat/turns/{turn_id}/events?after=0", token)
        assert replay.events() == seen
        replay.close()


def test_reconnect_served_by_a_second_server_process(server, server_env, token, recorded_model):
    recorded_model.load([durable_script(delay_ms=40)])
    second = ServerProcess(server_env)
    try:
        post = SSEClient(
            server.base_url, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "cards?"}
        )
        first = post.events(limit=4)
        post.close()
        follow = SSEClient(
            second.base_url,
            "GET",
            f"/api/chat/turns/{first[0][2]['turn_id']}/events",
            token,
            headers={"Last-Event-ID": str(first[-1][0])},
        )
        rest = follow.events()
        follow.close()
    finally:
        second.stop()
    assert rest[-1][1] == "done"
    assert [seq for seq, _, _ in first + rest] == list(range(1, len(first + rest) + 1))
    recorded_model.load([durable_script()])
    assert normalized(first + rest) == normalized(uninterrupted(server, token))


def crash_after_first_round(server, token, *, wait_step: int = 1) -> uuid.UUID:
    """Start a turn in `server`, SIGKILL the server once a checkpoint after `wait_step` tool rounds exists."""
    post = SSEClient(server.base_url, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "cards?"})
    turn_id = uuid.UUID(post.events(limit=1)[0][2]["turn_id"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        checkpoint = LiveTurn.objects.get(pk=turn_id).checkpoint
        if checkpoint and checkpoint.get("step", 0) >= wait_step:
            break
        time.sleep(0.02)
    server.kill()
    post.close()
    turn = LiveTurn.objects.get(pk=turn_id)
    assert turn.status == "running" and ChatLog.objects.filter(pk=turn_id).count() == 0
    return turn_id


def log_events(turn_id):
    return [(e.seq, e.event, e.data) for e in LiveTurn.objects.get(pk=turn_id).events.order_by("seq")]


def test_sigkill_after_a_tool_round_then_resume_turns(server, token, recorded_model):
    recorded_model.load([durable_script()])
    reference = uninterrupted(server, token)
    recorded_model.load([durable_script(delay_ms=150)])
    turn_id = crash_after_first_round(server, token, wait_step=2)
    recorded_model.load([durable_script()])
    call_command("resume_turns", "--stale-seconds", "0")
    turn = LiveTurn.objects.get(pk=turn_id)
    assert turn.status == "done" and turn.resume_count == 1 and turn.checkpoint is None
    assert stored(turn_id) == stored(reference[-1][2]["log_id"])
    from chat.live.events import format_sse

    events = parse_sse(b"".join(format_sse(*row) for row in log_events(turn_id)))
    assert normalized(events) == normalized(reference)


def test_checkpoint_without_citation_targets_resumes_untyped(server, token, recorded_model):
    recorded_model.load([durable_script(delay_ms=150)])
    turn_id = crash_after_first_round(server, token, wait_step=2)
    turn = LiveTurn.objects.get(pk=turn_id)
    assert isinstance(turn.checkpoint, dict)
    del turn.checkpoint["citationTargets"]  # a checkpoint written before targets existed
    turn.save(update_fields=["checkpoint"])
    recorded_model.load([durable_script()])
    call_command("resume_turns", "--stale-seconds", "0")
    row = stored(turn_id)
    first, second, third = row["inline"]
    assert first["target"]["kind"] == "accounts"  # streamed before the crash, typed
    assert "target" not in second and "target" not in third  # after the resume: empty registry
    events = log_events(turn_id)
    assert events[-1][1] == "done"


def test_malformed_checkpoint_entry_resumes_that_source_untyped(server, token, recorded_model):
    recorded_model.load([durable_script(delay_ms=150)])
    turn_id = crash_after_first_round(server, token, wait_step=2)
    turn = LiveTurn.objects.get(pk=turn_id)
    assert isinstance(turn.checkpoint, dict)
    turn.checkpoint["citationTargets"][CARDS] = {"kind": "account"}  # no accountId
    turn.save(update_fields=["checkpoint"])
    recorded_model.load([durable_script()])
    call_command("resume_turns", "--stale-seconds", "0")
    row = stored(turn_id)
    assert "target" not in row["inline"][1]  # the malformed source
    assert row["inline"][2]["target"] == {"kind": "card_document", "url": None}  # the others keep theirs


def test_reconnect_resumes_a_dead_turn(server, server_env, token, recorded_model):
    recorded_model.load([durable_script(delay_ms=150)])
    turn_id = crash_after_first_round(server, token)
    LiveTurn.objects.filter(pk=turn_id).update(heartbeat_at=timezone.now() - dt.timedelta(hours=1))
    recorded_model.load([durable_script()])
    second = ServerProcess(server_env)
    try:
        client = SSEClient(
            second.base_url, "GET", f"/api/chat/turns/{turn_id}/events", token, headers={"Last-Event-ID": "1"}
        )
        events = client.events()
        client.close()
    finally:
        second.stop()
    assert events[-1][1] == "done" and LiveTurn.objects.get(pk=turn_id).resume_count == 1
    assert ChatLog.objects.filter(pk=turn_id).exists()


def test_two_resumers_race_exactly_one_wins(maya, recorded_model):
    turns = [
        LiveTurn.objects.create(
            session_id=uuid.uuid4(),
            user=maya,
            user_message="hi",
            prompt_version="v5",
            heartbeat_at=timezone.now() - dt.timedelta(minutes=5),
        )
        for _ in range(5)
    ]
    barrier = threading.Barrier(2)
    wins: list[list] = [[], []]

    def resume(i):
        barrier.wait()
        for turn in turns:
            wins[i].extend(turn_claim_stale(turn_id=turn.id))
        from django.db import connection

        connection.close()

    threads = [threading.Thread(target=resume, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    claimed = wins[0] + wins[1]
    assert sorted(str(t) for t, _ in claimed) == sorted(str(t.id) for t in turns)  # each turn exactly once
    for turn_id, token in claimed:
        assert LiveTurn.objects.get(pk=turn_id).worker_token == token
    # A fresh heartbeat is not stale: nobody claims it again.
    assert turn_claim_stale(stale_seconds=60) == []
    # The winner's worker finishes the turn (no checkpoint: from its first step).
    recorded_model.load([script(step(text("Hello.")))])
    turn_id, token = claimed[0]
    start_worker(turn_id, token)
    assert wait_for_workers(30)
    assert LiveTurn.objects.get(pk=turn_id).status == "done"


def read_past_the_checkpoint(post: SSEClient, turn_id: uuid.UUID, held: list) -> int:
    """Read events until the client holds two past the checkpoint after the second tool round; its eventSeq."""
    deadline = time.monotonic() + 30
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


@pytest.mark.parametrize("resumer", ["resume_turns", "a reconnect"])
def test_killed_after_the_client_read_past_the_checkpoint_a_different_answer_rewinds(
    server, server_env, token, recorded_model, resumer
):
    recorded_model.load([durable_script(delay_ms=150)])
    post = SSEClient(server.base_url, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "cards?"})
    first = post.events(limit=1)
    turn_id = uuid.UUID(first[0][2]["turn_id"])
    checkpoint_seq = read_past_the_checkpoint(post, turn_id, first)
    server.kill()
    post.close()
    old_text = "".join(data["text"] for _, name, data in first if name == "text")
    assert old_text.startswith("Let me look.\n\nCards: \n\nYou owe")  # the first answer, cut short
    # Asked again, the model answers differently.
    recorded_model.load([durable_script(second_answer=True)])
    if resumer == "resume_turns":
        call_command("resume_turns", "--stale-seconds", "0")
    else:
        LiveTurn.objects.filter(pk=turn_id).update(heartbeat_at=timezone.now() - dt.timedelta(hours=1))
    second = ServerProcess(server_env)
    try:
        # The client reconnects where it stopped.
        again = SSEClient(
            second.base_url,
            "GET",
            f"/api/chat/turns/{turn_id}/events",
            token,
            headers={"Last-Event-ID": str(first[-1][0])},
        )
        rest = again.events()
        again.close()
        replay = SSEClient(second.base_url, "GET", f"/api/chat/turns/{turn_id}/events?after=0", token)
        from_start = replay.events()
        replay.close()
    finally:
        second.stop()
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
    assert "".join(data["text"] for _, name, data in first + rest if name == "text") != held_text(held)
    # A client reading the whole log from the start ends the same.
    assert apply_rewind(from_start) == held
    turn = LiveTurn.objects.get(pk=turn_id)
    assert turn.status == "done" and turn.resume_count == 1


def held_text(held):
    return "".join(data["text"] for _, name, data in held if name == "text")
