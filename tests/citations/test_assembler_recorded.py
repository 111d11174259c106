"""The one turn assembler, fed whole blocks (an import) or deltas (a live turn): equal results (docs/turns.md).

The delta side is real: each model step of a case is served by the recorded
model (devtools/) over HTTP, read by the official SDK's raw response and fed to
the assembler by the live turn's own adapter (`live.model_step`), as a
live turn does. No database.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import anthropic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citations.assembler import AssembledTurn, TurnAssembler, assemble_record, replay
from citations.citable import to_citable_content
from citations.live_events import EventName
from citations.registry import TurnRegistry
from citations.turn import AssistantEvent, Event, ToolCallEvent, parse_turn_record
from devtools.recorded_model import RecordedModelServer
from live.model_step import StepStream
from tests.cases import golden_params, load_cases, without_support

ROOT = Path(__file__).resolve().parents[2]
TURNS = load_cases("turns.json")
EXAMPLES = [
    pytest.param(record, id=f"{path.name}:{i}")
    for path in sorted((ROOT / "examples" / "turns").glob("*.json"))
    for i, record in enumerate(json.loads(path.read_text(encoding="utf-8")))
]


@pytest.fixture(scope="module")
def model():
    server = RecordedModelServer().start()
    yield server
    server.stop()


def streamed(model: RecordedModelServer, record: dict[str, Any]) -> tuple[AssembledTurn, list[Any]]:
    """Feed `record` to one assembler as a live turn does: each step streamed through the SDK, tools whole."""
    client = anthropic.Anthropic(api_key="test", base_url=model.base_url, max_retries=0)
    assembler = TurnAssembler()
    sent: list[Any] = []
    for event in parse_turn_record(record).events:
        if isinstance(event, ToolCallEvent):
            assembler.tool_call(event.name, event.input, event.output)
            continue
        model.load([{"name": "case", "steps": [{"message": dict(event.message)}]}])
        step = StepStream(assembler)
        request = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "q"}]}
        with client.messages.with_streaming_response.create(**request, stream=True) as response:  # type: ignore[call-overload]
            sent += step.read(response.iter_bytes())
        sent += step.finish()
    return assembler.result(), sent


def check_stream_equals_result(result: AssembledTurn, sent: list[Any]) -> None:
    assert "".join(e.data["text"] for e in sent if e.name == EventName.TEXT) == result.response
    assert [e.data["citation"] for e in sent if e.name == EventName.CITATION] == result.inline_citations


@pytest.mark.parametrize("case", golden_params(TURNS))
def test_a_vector_streamed_equals_the_vector_imported_and_its_expected_row(model, case):
    imported = assemble_record(parse_turn_record(case["record"]).events)
    live, sent = streamed(model, case["record"])
    assert live == imported
    assert (live.response, live.citations, without_support(live.inline_citations)) == (
        case["expect"]["response"],
        case["expect"]["citations"],
        case["expect"]["inline_citations"],
    )
    check_stream_equals_result(live, sent)


@pytest.mark.parametrize("record", EXAMPLES)
def test_an_example_turn_streamed_equals_it_imported(model, record):
    live, sent = streamed(model, record)
    assert live == assemble_record(parse_turn_record(record).events)
    check_stream_equals_result(live, sent)


# --- the feeding methods directly ---------------------------------------------

SQL = ToolCallEvent(
    "toolu_1",
    "execute_sql",
    {"query": "q"},
    {"rows": [{"account_name": "Checking", "source": "plaid", "source_account_id": "CHKaaaaaaaaaaaaaaaaa1"}]},
)
CHECKING = "silvia://your-account/checking"


def cite(cited_text: str = "account_name: Checking", kind: str = "search_result_location") -> dict[str, Any]:
    return {"type": kind, "source": CHECKING, "title": "Checking", "cited_text": cited_text}


def message(*blocks: dict[str, Any]) -> AssistantEvent:
    return AssistantEvent({"role": "assistant", "model": "m", "content": list(blocks)})


TURN: list[Event] = [
    message({"type": "text", "text": "Let me look 💳."}, {"type": "tool_use", "id": "t", "name": "x", "input": {}}),
    SQL,
    message(
        {"type": "text", "text": "", "citations": [cite("a")]},
        {"type": "text", "text": "Checking holds $5,000.", "citations": [cite("b"), cite("c", "char_location")]},
        {"type": "text", "text": " Done."},
    ),
]


def feed_in_pieces(assembler: TurnAssembler, event: Any, cuts: list[int]) -> list[Any]:
    """A step fed as deltas: each text cut at `cuts` (in order), citations after the text."""
    if isinstance(event, ToolCallEvent):
        assembler.tool_call(event.name, event.input, event.output)
        return []
    sent = assembler.start_step()
    for index, block in enumerate(event.message["content"]):
        sent += assembler.block_start(index, {**block, "text": ""} if block["type"] == "text" else block)
        text = block.get("text", "")
        edges = [0, *sorted({c % (len(text) + 1) for c in cuts}), len(text)]
        for start, end in itertools.pairwise(edges):
            sent += assembler.text(index, text[start:end])
        for citation in block.get("citations") or ():
            sent += assembler.citation(index, citation)
        sent += assembler.block_stop(index)
    return sent + assembler.end_step(event.message.get("model"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=0, max_value=40), max_size=6))
def test_any_cutting_of_the_text_into_deltas_gives_the_same_turn(cuts):
    whole = replay(TURN).result()
    assembler = TurnAssembler()
    sent: list[Any] = []
    for event in TURN:
        sent += feed_in_pieces(assembler, event, cuts)
    assert assembler.result() == whole
    check_stream_equals_result(whole, sent)
    assert whole.response == "Let me look 💳.\n\nChecking holds $5,000. Done."
    # "Let me look 💳.\n\n" is 17 UTF-16 code units: the empty block's citation sits there, after the blank line.
    assert [(c["cited_text"], c["start"], c["end"]) for c in whole.inline_citations] == [("a", 17, 17), ("b", 17, 39)]
    assert whole.inline_citations[1]["target"]["kind"] == "account" and whole.skipped_citations == {"char_location": 1}


def test_a_snapshot_between_steps_resumes_to_the_same_turn():
    first = TurnAssembler()
    replay(TURN[:2], first)
    registry = TurnRegistry.from_json(json.loads(json.dumps(first.registry.to_json())))
    # A checkpoint's messages: the tool results' texts come back from them (support, docs/support.md).
    blocks = [block.to_block() for block in to_citable_content(SQL.name, SQL.input, SQL.output)]
    messages = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": SQL.id, "content": blocks}]}]
    resumed = TurnAssembler.from_snapshot(json.loads(json.dumps(first.snapshot())), registry, messages)
    assert resumed is not None
    replay(TURN[2:], resumed)
    assert resumed.result() == replay(TURN).result()


@pytest.mark.parametrize(
    "snapshot",
    [None, [], {"answer": 1}, {"answer": "", "inline": [{"source": "s"}], "skipped": {}, "model": ""}],
)
def test_an_unreadable_snapshot_is_none(snapshot):
    assert TurnAssembler.from_snapshot(snapshot, TurnRegistry()) is None


def test_a_nul_and_a_lone_surrogate_in_model_text_become_u_fffd_in_the_events_and_the_row():
    assembler = TurnAssembler()
    sent = assembler.start_step() + assembler.block_start(0, {"type": "text", "text": ""})
    sent += assembler.text(0, "a\ud800b") + assembler.text(0, "c\x00d")
    sent += assembler.citation(0, {**cite(), "cited_text": "x\udfffy"})
    sent += assembler.block_stop(0) + assembler.end_step("m")
    result = assembler.result()
    assert result.response == "a\ufffdbc\ufffdd" and assembler.replaced == 3
    assert result.inline_citations[0]["cited_text"] == "x\ufffdy"
    check_stream_equals_result(result, sent)


def test_a_tool_calls_sources_carry_the_target_the_registry_holds_after_it():
    """`tool_sources` (the log-only `tool_result` event's sources): the registry's target, pooled or dropped."""
    assembler = TurnAssembler()

    def rows(*ids):
        return {"rows": [{"account_name": "Checking", "source": "plaid", "source_account_id": i} for i in ids]}

    first = assembler.tool_call("execute_sql", {"query": "a"}, rows("CHKaaaaaaaaaaaaaaaaa1"))
    one = {"accountId": "CHKaaaaaaaaaaaaaaaaa1", "provider": "plaid"}
    assert assembler.tool_sources(first) == [
        {"source": "silvia://your-account/checking", "title": "Checking", "target": {"kind": "account", **one}}
    ]
    # The block of the second call names one account; the registry pools both: the sources say what it holds.
    second = assembler.tool_call("execute_sql", {"query": "b"}, rows("CHKbbbbbbbbbbbbbbbbb2"))
    two = {"accountId": "CHKbbbbbbbbbbbbbbbbb2", "provider": "plaid"}
    assert assembler.tool_sources(second) == [
        {
            "source": "silvia://your-account/checking",
            "title": "Checking",
            "target": {"kind": "accounts", "accounts": [one, two]},
        }
    ]
    # Written once with no account: untyped for the rest of the turn, so no target key.
    third = assembler.tool_call("execute_sql", {"query": "c"}, {"rows": [{"account_name": "Checking"}]})
    assert assembler.tool_sources(third) == [{"source": "silvia://your-account/checking", "title": "Checking"}]
