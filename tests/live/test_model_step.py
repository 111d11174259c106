"""`live.model_step.StepStream` driven directly with stream events (SPEC 11, issue 38): a step is complete only at
`message_stop` with a stop reason; a field in the wrong shape is skipped and counted by its place, never an
error; a block index out of range is refused. Events are each event's `data` as the API sends it, a JSON object;
`StepStream.read` takes them as the raw response's bytes (server-sent events)."""

from __future__ import annotations

from typing import Any

import pytest

from citations.assembler import NOT_AN_OBJECT, TurnAssembler
from citations.registry import TurnRegistry
from live.errors import TurnFailure
from live.model_step import StepStream

Event = dict  # an event's `data`: Event(type="message_stop") is {"type": "message_stop"}

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


def _sse(*events: tuple[str, Any]) -> list[str]:
    """The lines of an event stream: `event:`, `data:`, a blank line (`_body` makes them bytes)."""
    import json

    lines: list[str] = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)  # U+2028 etc. kept raw
        lines += [f"event: {name}", f"data: {text}", ""]
    return lines


WHOLE = [_start(), _block(0), _text(0, "Hello "), _text(0, "there."), _stop_block(0), _delta(), STOP]


def _body(lines: list[str], *, end: str = "\n", size: int = 0) -> list[bytes]:
    """`lines` as a body: each ended by `end`, cut into chunks of `size` bytes (0: one chunk)."""
    data = "".join(line + end for line in lines).encode()
    return [data[i : i + size] for i in range(0, len(data), size)] if size else [data]


def _read(lines: list[str], **body: Any) -> tuple[StepStream, list[Any]]:
    step = StepStream(TurnAssembler(TurnRegistry()))
    return step, list(step.read(_body(lines, **body)))


def test_reading_the_event_stream_is_feeding_its_events():
    step, sent = _read(_sse(*((event["type"], event) for event in WHOLE)))
    fed, fed_sent = _feed(*WHOLE)
    assert step.complete and step.message == fed.message and _texts(sent) == "Hello there." == _texts(fed_sent)


def test_pings_comments_nameless_events_and_a_cut_last_event_are_skipped_as_the_sdk_skips_them():
    lines = [
        ": a comment line",
        *_sse(("message_start", _start())),
        *_sse(("ping", {"type": "ping"})),
        "data: " + '{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "no name"}}',
        "",
        *_sse(*((event["type"], event) for event in WHOLE[1:])),
        "event: content_block_delta",
        'data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "cut"}}',
    ]
    step, sent = _read(lines)
    assert _texts(sent) == "Hello there." and step.complete and step.skipped_fields == {}


def test_data_of_several_lines_is_joined_by_newlines_as_sse_says():
    start = ["event: message_start", 'data: {"type": "message_start",', 'data: "message": {"id": "msg_9"}}', ""]
    step, _ = _read([*start, *_sse(*((event["type"], event) for event in WHOLE[1:]))])
    assert step.message["id"] == "msg_9" and step.complete


@pytest.mark.parametrize("data", ["{not json", "[1, 2]", '"a string"'])
def test_an_event_whose_data_is_no_json_object_is_skipped_and_counted(data):
    lines = [*_sse(*((event["type"], event) for event in WHOLE[:3])), *_sse(("content_block_delta", data))]
    step, sent = _read([*lines, *_sse(*((event["type"], event) for event in WHOLE[3:]))])
    assert step.skipped_fields == {"event.data": 1} and _texts(sent) == "Hello there." and step.complete


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "overloaded_error"),
        ({"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}}, "rate_limit_error"),
        ({"type": "error", "error": {"type": "a_new_kind", "message": "?"}}, "api_error"),
        ({"type": "error", "error": {"type": {"an": "object"}}}, "api_error"),
        ("<html>not json</html>", "api_error"),
    ],
)
def test_an_error_event_ends_the_step_as_the_failure_its_type_names(data, kind):
    step = StepStream(TurnAssembler(TurnRegistry()))
    events = step.read(_body([*_sse(("message_start", _start())), *_sse(("error", data))]))
    with pytest.raises(TurnFailure) as raised:
        list(events)
    assert raised.value.kind == kind and not step.complete


def test_an_escaped_lone_surrogate_is_read_as_the_sdk_reads_it_and_the_text_keeps_u_fffd():
    delta = '{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a \\ud800 b"}}'
    lines = [*_sse(*((event["type"], event) for event in WHOLE[:2])), *_sse(("content_block_delta", delta))]
    step, sent = _read([*lines, *_sse(*((event["type"], event) for event in WHOLE[4:]))])
    assert step.skipped_fields == {} and step.complete
    assert _texts(sent) == "a \ufffd b" and step.assembler.replaced == 1


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("size", [0, 1, 7])
def test_lines_end_at_crlf_lf_or_cr_whatever_the_chunks(end, size):
    step, sent = _read(_sse(*((event["type"], event) for event in WHOLE)), end=end, size=size)
    assert step.complete and _texts(sent) == "Hello there." and step.skipped_fields == {}


def test_a_text_holding_line_and_paragraph_separators_and_a_form_feed_is_one_line_of_data():
    """U+2028, U+2029, U+0085 and a form feed end a line for `str.splitlines` (and `iter_lines`), not for SSE."""
    odd = "Line\u2028separator, paragraph\u2029next\u0085and a form feed\x0c."
    events = [*WHOLE[:2], _text(0, odd), *WHOLE[4:]]
    step, sent = _read(_sse(*((event["type"], event) for event in events)), size=5)
    assert _texts(sent) == odd and step.complete
