"""Checkpoints and the resume rule (docs/live.md#rewind, live/checkpoint.py)."""

from __future__ import annotations

import json
import uuid

import pytest

from chat.models import ChatLog
from citations.assembler import TurnAssembler
from citations.live_events import EventName
from live.checkpoint import TurnState, load_state, resume_rewind
from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus
from live.tasks import run_live_turn
from tests.live_support import SQL_OUTPUTS, cite, script, step, text, tool_use, wait_for_turns

CARDS = "silvia://your-account/credit-card"
FIRST = {
    "type": "message",
    "role": "assistant",
    "model": "recorded-model-not-claude",
    "content": [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "execute_sql", "input": {"query": "cards"}},
    ],
    "stop_reason": "tool_use",
}
TOOL_CALL = {"type": "tool_call", "id": "toolu_1", "name": "execute_sql", "input": {"query": "cards"}}


def older_checkpoint(event_seq: int) -> dict:
    """A checkpoint as the version before the assembler wrote it: `answer` offsets, `restores`, no `assembler`."""
    return {
        "step": 1,
        "messages": [
            {"role": "user", "content": "How much do I owe?"},
            {"role": "assistant", "content": FIRST["content"]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "…"}]},
        ],
        "events": [{"type": "assistant", "message": FIRST}, {**TOOL_CALL, "output": SQL_OUTPUTS["cards"]}],
        "citationTargets": {
            CARDS: {
                "kind": "accounts",
                "accounts": [
                    {"accountId": "CARDaaaaaaaaaaaaaaaa1", "provider": "plaid"},
                    {"accountId": "CARDbbbbbbbbbbbbbbbb2", "provider": "plaid"},
                ],
            }
        },
        "eventSeq": event_seq,
        "answer": {"offset": 12, "hasText": True, "inline": [], "skipped": {}},
        "restores": [],
    }


def test_the_resume_rule():
    state = TurnState(messages=[{"role": "user", "content": "q"}], event_seq=9)
    state.assembler.start_step()
    state.assembler.block_start(0, {"type": "text", "text": ""})
    state.assembler.text(0, "Let me look.")
    state.assembler.end_step()
    assert resume_rewind(state, 9) is None  # nothing sent past the checkpoint: the new output extends it
    rewind = resume_rewind(state, 14)
    assert rewind is not None and rewind.name == EventName.REWIND
    assert rewind.data == {"to": 9, "answer": "Let me look."}


@pytest.mark.django_db
def test_an_older_checkpoint_is_read_by_replaying_its_events(maya):
    turn = LiveTurn.objects.create(
        session_id=uuid.uuid4(), user=maya, user_message="q", prompt_version="v5", checkpoint=older_checkpoint(3)
    )
    state = load_state(turn)
    assert state.assembler.answer == "Let me look." and state.event_seq == 3 and state.step == 1
    assert state.registry.to_json() == older_checkpoint(3)["citationTargets"]
    # What the checkpoint now holds is read back as is.
    again = json.loads(json.dumps(state.to_json()))
    assert again["assembler"] == {
        "answer": "Let me look.",
        "inline": [],
        "skipped": {},
        "model": FIRST["model"],
        "replaced": 0,
    }
    restored = TurnAssembler.from_snapshot(again["assembler"], state.registry)
    assert restored is not None and restored.result() == state.assembler.result()


def test_a_turn_resumed_from_an_older_checkpoint_past_it_rewinds_and_is_stored(maya, recorded_model):
    recorded_model.load(
        [
            script(
                step(text("Let me look."), tool_use("toolu_1", "execute_sql", {"query": "cards"})),
                step(text("You owe $1,500.", cite(CARDS, "account_name: Credit card; balance: 1200", "Credit card"))),
            )
        ]
    )
    turn = LiveTurn.objects.create(
        session_id=uuid.uuid4(),
        user=maya,
        user_message="How much do I owe?",
        prompt_version="v5",
        checkpoint=older_checkpoint(3),
        last_seq=5,  # a worker sent two events past its checkpoint, then died
        status=LiveTurnStatus.RUNNING,
    )
    sent = [("turn", {}), ("text", {"text": "Let me"}), ("text", {"text": " look."}), ("text", {"text": "\n\n"})]
    sent.append(("text", {"text": "You owe nothing"}))
    LiveTurnEvent.objects.bulk_create(
        LiveTurnEvent(turn=turn, seq=i, event=name, data=json.dumps(data)) for i, (name, data) in enumerate(sent, 1)
    )
    run_live_turn.apply_async(args=[str(turn.id)], task_id=str(turn.task_id))  # its task, redelivered: a takeover
    assert wait_for_turns(30)
    turn.refresh_from_db()
    assert turn.status == "done" and turn.stop_reason == "end_turn"
    log = [(e.seq, e.event, json.loads(e.data)) for e in turn.events.order_by("seq")]
    assert log[5] == (6, "rewind", {"to": 3, "answer": "Let me look."})
    row = ChatLog.objects.get(pk=turn.id)
    assert row.response == "Let me look.\n\nYou owe $1,500."
    assert row.inline_citations[0]["target"]["kind"] == "accounts"
    assert (row.inline_citations[0]["start"], row.inline_citations[0]["end"]) == (14, 29)
