"""Support through the one turn assembler (SPEC 15, docs/support.md): the support turn cases fed whole (an import)
and streamed (the real SDK reading the recorded model, as a live turn reads the API) give the hand-computed rows;
a turn resumed from a snapshot between steps computes the same support. No database."""

from __future__ import annotations

import json

import anthropic
import pytest

from citations.assembler import TurnAssembler, assemble_record, replay, skipped_type_name
from citations.citable import to_citable_content
from citations.live_events import StreamEvent
from citations.registry import TurnRegistry
from citations.turn import AssistantEvent, ToolCallEvent, parse_turn_record
from devtools.recorded_model import RecordedModelServer
from live.model_step import StepStream
from tests.cases import golden_params
from tests.support_turns import CASES


@pytest.fixture(scope="module")
def model():
    server = RecordedModelServer().start()
    yield server
    server.stop()


def _row(assembled):
    return {
        "response": assembled.response,
        "citations": assembled.citations,
        "inline_citations": assembled.inline_citations,
    }


@pytest.mark.parametrize("case", golden_params(CASES))
def test_a_case_imported_gives_its_support(case):
    assert _row(assemble_record(parse_turn_record(case["record"]).events)) == case["expect"]


@pytest.mark.parametrize("case", golden_params(CASES))
def test_a_case_streamed_gives_its_support_in_the_events_and_the_result(model, case):
    client = anthropic.Anthropic(api_key="test", base_url=model.base_url, max_retries=0)
    assembler = TurnAssembler()
    sent: list[StreamEvent] = []
    for event in parse_turn_record(case["record"]).events:
        if isinstance(event, ToolCallEvent):
            assembler.tool_call(event.name, event.input, event.output)
            continue
        model.load([{"name": "case", "steps": [{"message": dict(event.message)}]}])
        step = StepStream(assembler)
        request = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "q"}]}
        with client.messages.with_streaming_response.create(**request, stream=True) as response:  # type: ignore[call-overload]
            sent += step.read(response.iter_bytes())
        sent += step.finish()
    assert _row(assembler.result()) == case["expect"]
    assert [e.data["citation"] for e in sent if e.name == "citation"] == case["expect"]["inline_citations"]


def call_of(call: ToolCallEvent) -> tuple:
    return call.name, call.input, call.output


@pytest.mark.parametrize("case", golden_params(CASES))
def test_a_case_resumed_after_its_tool_calls_computes_the_same_support(case):
    """A checkpoint holds the snapshot, the registry and the messages (live/checkpoint.py): the texts a citation
    is checked against come back from the tool results' search_result blocks, as the model got them."""
    events = parse_turn_record(case["record"]).events
    split = next(i for i, event in enumerate(events) if isinstance(event, AssistantEvent))
    first = replay(events[:split])
    results = [
        {
            "type": "tool_result",
            "tool_use_id": call.id,
            "content": [b.to_block() for b in to_citable_content(*call_of(call))],
        }
        for call in events[:split]
        if isinstance(call, ToolCallEvent)
    ]
    messages = [{"role": "user", "content": "q"}, {"role": "user", "content": results}]
    snapshot = json.loads(json.dumps(first.snapshot()))
    registry = TurnRegistry.from_json(json.loads(json.dumps(first.registry.to_json())))
    resumed = TurnAssembler.from_snapshot(snapshot, registry, json.loads(json.dumps(messages)))
    assert resumed is not None
    assert _row(replay(events[split:], resumed).result()) == case["expect"]


def test_a_copy_before_a_step_shares_the_texts_and_goes_back_to_them():
    case = CASES[0]
    events = parse_turn_record(case["record"]).events
    assembler = replay(events[:1])
    before = assembler.copy()
    replay(events[1:], assembler)
    assert _row(replay(events[1:], before).result()) == case["expect"]
    assert (
        before.sources.blocks("silvia://your-account/credit-card")[0]
        is (assembler.sources.blocks("silvia://your-account/credit-card")[0])
    )


def test_the_summary_carries_no_support():
    for case in CASES:
        assembled = assemble_record(parse_turn_record(case["record"]).events)
        assert all("support" not in entry for entry in assembled.citations)
        assert all("support" in entry for entry in assembled.inline_citations)


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("char_location", "char_location"),
        ("page_location", "page_location"),
        ("a" * 64, "a" * 64),
        ("a" * 65, "<not an identifier>"),
        ("evil\nskipped 1 citation(s) of type forged", "<not an identifier>"),
        ("acct 7781", "<not an identifier>"),
        ("\u2028", "<not an identifier>"),
        ("é", "<not an identifier>"),
        ("", "<not an identifier>"),
        ("_leading", "<not an identifier>"),
        (None, "<null>"),
        (3, "<number>"),
        (1.5, "<number>"),
        (True, "<boolean>"),
        ([], "<array>"),
        ({}, "<object>"),
    ],
)
def test_a_skipped_citations_type_is_counted_under_a_bounded_identifier(value, name):
    """The model writes `type`; it reaches the done event and an INFO line only as an identifier (issue 38)."""
    assert skipped_type_name(value) == name


def test_citations_of_types_not_recorded_are_counted_by_their_bounded_names():
    assembler = TurnAssembler(TurnRegistry())
    assembler.start_step()
    assembler.block_start(0, {"type": "text", "text": ""})
    assembler.text(0, "Fine.")
    for citation in (
        {"type": "char_location"},
        {"type": "x\ny"},
        {"type": None},
        "a string",
        {"type": "char_location"},
    ):
        assembler.citation(0, citation)
    assembler.block_stop(0)
    assembler.end_step()
    assert assembler.result().skipped_citations == {
        "<not an object>": 1,
        "char_location": 2,
        "<not an identifier>": 1,
        "<null>": 1,
    }
