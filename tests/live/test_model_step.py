"""`live.model_step.StepStream` driven directly with stream events (SPEC 11, issue 38): a step is complete only at
`message_stop` with a stop reason; a field in the wrong shape is skipped and counted by its place, never an
error; a block index out of range is refused. Events are what the SDK's raw stream yields: objects with the
event's attributes, nested objects as the JSON the SDK's `to_dict` gives."""

from __future__ import annotations

import warnings
from types import SimpleNamespace as Event
from typing import Any

import pytest

from citations.assembler import NOT_AN_OBJECT, TurnAssembler
from citations.registry import TurnRegistry
from live.model_step import StepStream

MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": [], "usage": {}}


def _start(message: Any = MESSAGE) -> Event:
    return Event(type="message_start", message=message)


def _block(index: Any, block: Any = None) -> Event:
    return Event(
        type="content_block_start", index=index, content_block={"type": "text", "text": ""} if block is None else block
    )


def _text(index: Any, value: Any) -> Event:
    return Event(type="content_block_delta", index=index, delta=Event(type="text_delta", text=value))


def _stop_block(index: Any) -> Event:
    return Event(type="content_block_stop", index=index)


def _delta(stop_reason: Any = "end_turn", usage: Any = None) -> Event:
    return Event(type="message_delta", delta={"stop_reason": stop_reason}, usage=usage if usage is not None else {})


STOP = Event(type="message_stop")


def _feed(*events: Event) -> tuple[StepStream, list[Any]]:
    step = StepStream(TurnAssembler(TurnRegistry()))
    sent = [event for raw in events for event in step.feed(raw)]
    return step, sent


def _texts(sent: list[Any]) -> str:
    return "".join(event.data["text"] for event in sent if event.name == "text")


def test_a_whole_message_is_complete():
    step, sent = _feed(_start(), _block(0), _text(0, "Hello "), _text(0, "there."), _stop_block(0), _delta(), STOP)
    assert step.complete and step.stop_reason == "end_turn" and step.skipped_fields == {}
    assert _texts(sent) == "Hello there."
    assert step.message["content"] == [{"type": "text", "text": "Hello there."}]


@pytest.mark.parametrize(
    "events",
    [
        pytest.param([_start(), _block(0), _text(0, "You can safely withdraw")], id="cut mid-text-block"),
        pytest.param([_start(), _block(0), _text(0, "Done."), _stop_block(0)], id="cut between blocks"),
        pytest.param([_start(), _block(0), _text(0, "Done."), _stop_block(0), _delta()], id="no message_stop"),
        pytest.param(
            [_start(), _block(0), _text(0, "Done."), _stop_block(0), _delta(None), STOP], id="stop reason null"
        ),
        pytest.param([], id="no event at all (an empty or non-SSE body)"),
        pytest.param([_start(), STOP], id="message_stop without message_delta"),
    ],
)
def test_a_stream_that_ends_before_message_stop_with_a_stop_reason_is_not_complete(events):
    step, _ = _feed(*events)
    assert not step.complete


def test_a_tool_input_cut_mid_json_is_not_complete():
    tool = {"type": "tool_use", "id": "toolu_1", "name": "execute_sql", "input": {}}
    partial = Event(
        type="content_block_delta", index=0, delta=Event(type="input_json_delta", partial_json='{"sql": "sel')
    )
    step, _ = _feed(_start(), _block(0, tool), partial)
    assert not step.complete


@pytest.mark.parametrize(
    ("bad", "place"),
    [
        (Event(type="content_block_delta", index=0, delta=Event(type="text_delta", text=None)), "text_delta.text"),
        (Event(type="content_block_delta", index=0, delta=Event(type="text_delta", text=12)), "text_delta.text"),
        (Event(type="content_block_start", index=1, content_block=None), "content_block_start.content_block"),
        (Event(type="content_block_start", index=1, content_block="text"), "content_block_start.content_block"),
        (_text(-1, "appended to the last block?"), "content_block_delta.index"),
        (_text(5, "beyond the blocks"), "content_block_delta.index"),
        (_text("0", "a string index"), "content_block_delta.index"),
        (_text(True, "a boolean index"), "content_block_delta.index"),
        (_block(-1), "content_block_start.index"),
        (_block(10**9), "content_block_start.index"),
        (_stop_block(7), "content_block_stop.index"),
        (Event(type="message_delta", delta={"stop_reason": "end_turn"}, usage=None), "message_delta.usage"),
        (Event(type="message_delta", delta=None, usage={}), "message_delta.delta"),
        (Event(type="message_delta", delta={"stop_reason": {"x": 1}}, usage={}), "message_delta.delta.stop_reason"),
    ],
)
def test_a_field_in_the_wrong_shape_is_skipped_and_counted_by_its_place(bad, place):
    step, sent = _feed(_start(), _block(0), _text(0, "Fine."), bad, _stop_block(0), _delta(), STOP)
    assert step.skipped_fields == {place: 1}
    assert _texts(sent) == "Fine." and step.message["content"][0] == {"type": "text", "text": "Fine."}
    assert step.complete  # the rest of the stream stands


def test_a_bare_message_start_is_counted_and_the_step_goes_on():
    step, sent = _feed(_start(None), _block(0), _text(0, "Fine."), _stop_block(0), _delta(), STOP)
    assert step.skipped_fields == {"message_start.message": 1}
    assert step.complete and _texts(sent) == "Fine."
    assert step.message["role"] == "assistant" and step.message["type"] == "message"


@pytest.mark.parametrize("citation", ["a string", 3, None, ["a", "list"], True])
def test_a_citation_that_is_no_object_is_counted_as_a_citation_type_not_recorded(citation):
    bad = Event(type="content_block_delta", index=0, delta=Event(type="citations_delta", citation=citation))
    step, _ = _feed(_start(), _block(0), _text(0, "Fine."), bad, _stop_block(0), _delta(), STOP)
    assert step.skipped_fields == {"citations_delta.citation": 1}
    assert step.assembler.result().skipped_citations == {NOT_AN_OBJECT: 1}
    assert "citations" not in step.message["content"][0]


def test_sdk_models_are_read_without_pydantic_warnings_that_would_quote_their_values():
    """A model whose field holds the wrong type: its `to_dict` warns, quoting the value, unless told not to."""
    from anthropic.types import TextBlock

    block = TextBlock.construct(type="text", text={"account": "Roth IRA 1234"})  # not validated, as the SDK builds
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would fail the test
        step, _ = _feed(_start(), _block(0, block), _stop_block(0), _delta(), STOP)
    assert step.message["content"][0]["text"] == {"account": "Roth IRA 1234"}
