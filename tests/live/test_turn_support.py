"""Support (SPEC 15, docs/support.md) in live turns: each support case run as a live turn (the real SDK reading the
recorded model over HTTP, a Celery worker, tools answering with the case's outputs) streams its hand-computed support
in the `citation` events, stores it, GET serves it, and an import of the same turn stores the same row."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import Counter

import pytest
from prometheus_client import REGISTRY

from chat.models import ChatLog
from citations.support import SUPPORT_STATUSES
from live.checkpoint import TurnState
from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus
from live.tasks import run_live_turn
from tests.cases import golden_params
from tests.live import live_turns_support
from tests.live.live_turns_support import check_events_equal_get, run_turn
from tests.live_support import SQL_OUTPUTS, cite, script, step, text, tool_use, wait_for_turns
from tests.support_turns import CASES, TOOL_FACTORIES, live_steps


def _live_counts() -> dict[str, float]:
    return {
        status: REGISTRY.get_sample_value("silvia_citation_support_total", {"path": "live", "status": status}) or 0.0
        for status in (*SUPPORT_STATUSES, "none")
    }


#: maya's API client (tests/live/live_turns_support.py), bound here for this module.
client = live_turns_support.client

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("case", golden_params(CASES))
def test_a_live_turn_streams_stores_and_serves_the_hand_computed_support(client, recorded_model, settings, case):
    settings.LIVE_TOOL_FACTORIES = TOOL_FACTORIES
    before = _live_counts()
    session_id, events = run_turn(client, recorded_model, *live_steps(case["record"]))
    moved = Counter({status: n - before[status] for status, n in _live_counts().items()})
    stored = check_events_equal_get(client, session_id, events)
    # docs/metrics.md: the worker counted the stored turn's citations by support status.
    assert +moved == Counter(citation["support"]["status"] for citation in case["expect"]["inline_citations"])
    assert [data["citation"] for _, name, data in events if name == "citation"] == case["expect"]["inline_citations"]
    assert (stored["response"], stored["citations"], stored["inline_citations"]) == (
        case["expect"]["response"],
        case["expect"]["citations"],
        case["expect"]["inline_citations"],
    )


CARDS = "silvia://your-account/credit-card"
ROWS = ("account_name: Credit card; balance: 1200", "account_name: Credit card; balance: 300")


@pytest.mark.parametrize("older", [False, True], ids=["checkpoint", "older checkpoint without assembler state"])
def test_a_turn_resumed_from_its_checkpoint_computes_the_same_support(maya, recorded_model, older):
    """A worker died after the tool round: the turn resumes from its checkpoint (the assembler's snapshot, or
    an older checkpoint's events replayed) and its citation is checked against the tool call's rows as the
    model got them (on PostgreSQL the checkpoint's jsonb reorders the recorded rows' keys: `source` first)."""
    first = {
        "type": "message",
        "role": "assistant",
        "model": "recorded-model-not-claude",
        "content": [text("Let me look."), tool_use("toolu_1", "execute_sql", {"query": "cards"})],
        "stop_reason": "tool_use",
    }
    state = TurnState(messages=[{"role": "user", "content": "How much do I owe?"}], event_seq=3)
    state.assembler.assistant_message(first)
    blocks = state.assembler.tool_call("execute_sql", {"query": "cards"}, SQL_OUTPUTS["cards"])
    # What the model was sent (live/tool_calls.py): the blocks a resumed turn's support is checked against.
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [block.to_block() for block in blocks]}
    state.messages += [{"role": "assistant", "content": first["content"]}, {"role": "user", "content": [result]}]
    tool_call = {"type": "tool_call", "id": "toolu_1", "name": "execute_sql", "input": {"query": "cards"}}
    state.events = [{"type": "assistant", "message": first}, {**tool_call, "output": SQL_OUTPUTS["cards"]}]
    state.step = 1
    checkpoint = json.loads(json.dumps(state.to_json()))
    if older:
        del checkpoint["assembler"]
    recorded_model.load(
        [
            script(
                step(text("Let me look."), tool_use("toolu_1", "execute_sql", {"query": "cards"})),
                step(text("You owe $1,500.", cite(CARDS, "\n".join(ROWS), "Credit card"))),
            )
        ]
    )
    turn = LiveTurn.objects.create(
        session_id=uuid.uuid4(),
        user=maya,
        user_message="How much do I owe?",
        prompt_version="v5",
        checkpoint=checkpoint,
        last_seq=3,
        status=LiveTurnStatus.RUNNING,
    )
    sent = [("turn", {}), ("text", {"text": "Let me"}), ("text", {"text": " look."})]
    LiveTurnEvent.objects.bulk_create(
        LiveTurnEvent(turn=turn, seq=i, event=name, data=json.dumps(data)) for i, (name, data) in enumerate(sent, 1)
    )
    run_live_turn.apply_async(args=[str(turn.id)], task_id=str(turn.task_id))  # its task, redelivered
    assert wait_for_turns(30)
    row = ChatLog.objects.get(pk=turn.id)
    assert row.response == "Let me look.\n\nYou owe $1,500."
    # $1,500 is 1200 + 300; the digest is of the block's two row texts joined with a newline.
    digest = "sha256:" + hashlib.sha256("\n".join(ROWS).encode()).hexdigest()
    assert row.inline_citations[0]["support"] == {"status": "supported", "unmatched": [], "digest": digest}
    streamed = [json.loads(e.data)["citation"] for e in turn.events.filter(event="citation")]
    assert streamed == row.inline_citations
