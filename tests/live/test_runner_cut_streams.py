"""A model stream is an answer only at `message_stop` (SPEC 11, issue 38 items 1 and 5; docs/live.md#failures).

The official SDK against the recorded model over HTTP (`devtools/recorded_model.py`, the real Messages
streaming wire format), through the API and a live worker: a stream that ends cleanly before `message_stop`
(mid-text-block, between blocks, inside a tool input's JSON), an HTTP 200 with an empty or an HTML body, is
asked again after a `rewind`, `LIVE_TURN_CUT_STREAM_RETRIES` times, then the turn fails with
`model_stream_cut`: no row, no `done`, nothing of it stored. Hostile fields are skipped and counted, never
`internal_error`; the answer's cap holds as it streams; nothing the model wrote reaches a log line.
"""

from __future__ import annotations

import logging

import pytest

from chat.models import ChatLog
from devtools.recorded_stream import message_events
from live.models import LiveTurn, LiveTurnStatus
from tests.live import live_turns_support
from tests.live.live_turns_support import SCRIPTED, check_events_equal_get, post_turn, run_turn
from tests.live_support import parse_frames, parse_sse, script, step, text, tool_use, wait_for_turns

client = live_turns_support.client

pytestmark = pytest.mark.django_db(transaction=True)

HALF = "You can safely withdraw all of your savings and keep them."
WHOLE = step(text("Keep three months of expenses in savings."), stop="end_turn")
CUT_MESSAGE = "The assistant's answer was cut off before it was complete. Please try again."


def _cut(message_step: dict, before_event: int) -> dict:
    """`message_step` streamed up to (not including) event `before_event`, then the body ends cleanly."""
    return {**message_step, "end_after": before_event}


def _names(events) -> list[str]:
    return [name for _, name, _ in events]


def _failed_with_cut(client, recorded_model, attempt: dict, settings) -> list:
    settings.LIVE_TURN_CUT_STREAM_RETRIES = 2
    recorded_model.load([script({"attempts": [attempt]})])
    _, response = post_turn(client)
    frames = parse_frames(b"".join(response.streaming_content))
    wait_for_turns()
    assert frames[-1][1] == "error"
    assert frames[-1][2] == {"error": {"type": "model_stream_cut", "message": CUT_MESSAGE}}
    assert "done" not in _names(frames)
    assert len(recorded_model.requests) == 3  # the first request and LIVE_TURN_CUT_STREAM_RETRIES more
    assert ChatLog.objects.count() == 0
    turn = LiveTurn.objects.get()
    assert turn.status == LiveTurnStatus.FAILED and turn.stop_reason in (None, "")
    return frames


def test_a_stream_cut_mid_text_block_is_asked_again_then_fails_the_turn(client, recorded_model, settings):
    cut = _cut(step(text(HALF), stop="end_turn"), 5)  # message_start, ping, block start, two 12-character deltas
    frames = _failed_with_cut(client, recorded_model, cut, settings)
    # Each attempt streamed "You can safely withdraw " and was rewound before the next: the client's answer is
    # empty when the error comes.
    rewinds = [data for _, name, data in frames if name == "rewind"]
    assert len(rewinds) == 3 and all(r["answer"] == "" for r in rewinds)
    assert "".join(data["text"] for _, name, data in parse_sse(_body(frames)) if name == "text") == ""


def _body(frames) -> bytes:
    """The frames written back as SSE, for `parse_sse` (which applies the rewinds)."""
    import json

    return b"".join(f"id: {seq}\nevent: {name}\ndata: {json.dumps(data)}\n\n".encode() for seq, name, data in frames)


def test_a_stream_cut_between_blocks_fails_the_turn(client, recorded_model, settings):
    events = message_events(step(text("First."), text("Second."), stop="end_turn")["message"])
    between = next(n for n, (name, _) in enumerate(events) if name == "content_block_stop") + 1
    _failed_with_cut(
        client, recorded_model, _cut(step(text("First."), text("Second."), stop="end_turn"), between), settings
    )


def test_a_stream_without_message_stop_fails_the_turn(client, recorded_model, settings):
    whole = step(text("Done."), stop="end_turn")
    stop_at = len(message_events(whole["message"])) - 1  # everything but message_stop
    _failed_with_cut(client, recorded_model, _cut(whole, stop_at), settings)


def test_a_tool_input_cut_mid_json_fails_the_turn_and_no_tool_runs(client, recorded_model, settings):
    calls = step(
        tool_use("toolu_1", "read_credit_card_document", {"path": "chase/sapphire-preferred/pricing.md"}),
        stop="tool_use",
    )
    events = message_events(calls["message"])
    inside = (
        next(n for n, (_, data) in enumerate(events) if data.get("delta", {}).get("type") == "input_json_delta") + 1
    )
    frames = _failed_with_cut(client, recorded_model, _cut(calls, inside), settings)
    assert "tool_call" not in _names(frames) and "tool_result" not in _names(frames)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"raw": "", "content_type": "text/event-stream"}, id="HTTP 200, empty body"),
        pytest.param({"raw": "<html>502 Bad Gateway</html>", "content_type": "text/html"}, id="HTTP 200, HTML body"),
    ],
)
def test_an_answer_that_is_no_event_stream_fails_the_turn(client, recorded_model, settings, body):
    _failed_with_cut(client, recorded_model, body, settings)


def test_a_cut_stream_then_a_whole_one_stores_the_whole_answer_only(client, recorded_model):
    cut = _cut(step(text(HALF), stop="end_turn"), 5)
    session_id, events = run_turn(client, recorded_model, {"attempts": [cut, WHOLE]})
    assert len(recorded_model.requests) == 2
    stored = check_events_equal_get(client, session_id, events)  # rewind applied: the events carry the whole answer
    assert stored["response"] == "Keep three months of expenses in savings."
    assert events[-1][2]["stop_reason"] == "end_turn"


def _hostile(bad_events: list[tuple[str, dict]]) -> dict:
    """A whole answer "Fine." with `bad_events` sent after its first text delta."""
    events = message_events(step(text("Fine."), stop="end_turn")["message"])
    first_text = next(n for n, (_, data) in enumerate(events) if data.get("delta", {}).get("type") == "text_delta")
    raw = events[: first_text + 1] + bad_events + events[first_text + 1 :]
    return {"events": [{"event": name, "data": data} for name, data in raw]}


SECRET = "Roth IRA acct-7781 balance"
#: The loggers `silvia.log_filters` drops at every handler, whatever their level.
HTTP_CLIENT_LOGGERS = ("anthropic", "httpx", "httpx2", "httpcore", "httpcore2")


@pytest.mark.parametrize(
    ("bad", "skipped_citations"),
    [
        pytest.param(
            [
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "citations_delta", "citation": SECRET},
                    },
                )
            ],
            {"<not an object>": 1},
            id="a citation that is a string",
        ),
        pytest.param(
            [
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": None}},
                )
            ],
            {"<not an object>": 1},
            id="a citation that is null",
        ),
        pytest.param(
            [
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": None}},
                )
            ],
            {},
            id="a null text",
        ),
        pytest.param(
            [
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": -1, "delta": {"type": "text_delta", "text": SECRET}},
                )
            ],
            {},
            id="a delta at index -1",
        ),
        pytest.param(
            [("content_block_start", {"type": "content_block_start", "index": 1, "content_block": None})],
            {},
            id="a null content_block",
        ),
        pytest.param(
            [
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {
                            "type": "citations_delta",
                            "citation": {"type": f"evil\n{SECRET}", "cited_text": SECRET},
                        },
                    },
                )
            ],
            {"<not an identifier>": 1},
            id="a citation type with a newline",
        ),
    ],
)
def test_a_hostile_field_is_skipped_and_counted_and_the_turn_is_done(
    client, recorded_model, caplog, bad, skipped_citations
):
    caplog.set_level(logging.DEBUG)
    session_id, events = run_turn(client, recorded_model, _hostile(bad))
    assert _names(events)[-1] == "done", events[-1]
    assert events[-1][2]["skipped_citations"] == skipped_citations
    SCRIPTED.pop(str(session_id))  # raw events: no whole message for the import's side of the check
    assert check_events_equal_get(client, session_id, events)["response"] == "Fine."
    wait_for_turns()
    for record in caplog.records:
        if record.name.split(".")[0] in HTTP_CLIENT_LOGGERS:
            continue  # their DEBUG lines quote whole requests; the handlers' filter drops them (docs/privacy.md)
        message = record.getMessage()
        assert "acct-7781" not in message and "\n" not in message, (record.name, message)
        assert record.name != "py.warnings", message


def test_an_error_event_whose_type_is_an_object_fails_as_an_api_error(client, recorded_model):
    events = message_events(step(text("Fine."), stop="end_turn")["message"])
    error = {"type": "error", "error": {"type": {"nested": SECRET}, "message": SECRET}}
    raw = [*events[:4], ("error", error)]
    recorded_model.load([script({"events": [{"event": name, "data": data} for name, data in raw]})])
    _, response = post_turn(client)
    frames = parse_frames(b"".join(response.streaming_content))
    assert frames[-1][1] == "error" and frames[-1][2]["error"]["type"] == "api_error"
    assert ChatLog.objects.count() == 0


def test_the_answer_cap_holds_as_it_streams(client, recorded_model, settings):
    settings.TURN_MAX_TEXT_CHARS = 30
    recorded_model.load([script(step(text("x" * 240), stop="end_turn"))])
    _, response = post_turn(client)
    frames = parse_frames(b"".join(response.streaming_content))
    assert frames[-1][2]["error"]["type"] == "answer_too_long"
    streamed = "".join(data["text"] for _, name, data in frames if name == "text")
    assert streamed == "x" * 24  # two 12-character deltas; the third would pass 30 and was never sent
    wait_for_turns()
    assert ChatLog.objects.count() == 0
