"""The AI SDK stream of a live turn (citations/ai_sdk.py, docs/live.md#the-ai-sdk-stream-protocolai-sdk): a turn's
chunks from start to finish, the bytes (one data line a chunk, then [DONE]), escaping, a lone surrogate; how
it ends: finish reasons, a failed turn's error part, the events that give nothing.

Pure: no database, no HTTP. Expected chunk lists are written out by hand."""

from __future__ import annotations

import json

import pytest

from citations.ai_sdk import DONE_FRAME, Row, UIMessageStream, finish_reason, format_chunk, stream_bytes
from tests.citations.ai_sdk_stream_support import (
    CARDS,
    CARDS_CITATION,
    CARDS_TARGET,
    DONE,
    START,
    TWO_STEPS,
    S,
    T,
    _document,
)

CARDS_SOURCE = _document(CARDS, "Credit card")


def test_a_turn_of_two_steps_and_a_tool_round():
    assert UIMessageStream().feed(TWO_STEPS) == [
        START,
        {"type": "start-step"},
        {"type": "text-start", "id": "text-2"},
        {"type": "text-delta", "id": "text-2", "delta": "Let me look."},
        {"type": "text-end", "id": "text-2"},
        {
            "type": "tool-input-available",
            "toolCallId": "toolu_1",
            "toolName": "execute_sql",
            "input": {"query": "cards"},
            "providerExecuted": True,
        },
        {
            "type": "tool-output-available",
            "toolCallId": "toolu_1",
            "output": {"sources": [{"source": CARDS, "title": "Credit card", "target": CARDS_TARGET}]},
        },
        {"type": "finish-step"},
        {"type": "start-step"},
        {"type": "text-start", "id": "text-5"},
        {"type": "text-delta", "id": "text-5", "delta": "\n\nYou owe "},
        {"type": "text-delta", "id": "text-5", "delta": "$1,500"},
        {"type": "text-end", "id": "text-5"},
        CARDS_SOURCE,
        {"type": "data-citation", "data": CARDS_CITATION},
        {"type": "text-start", "id": "text-8"},
        {"type": "text-delta", "id": "text-8", "delta": " in total."},
        {"type": "text-end", "id": "text-8"},
        {"type": "finish-step"},
        {
            "type": "data-citations_summary",
            "data": [
                {
                    "source": CARDS,
                    "title": "Credit card",
                    "cited_text": "account_name: Credit card; balance: 1200",
                    "target": CARDS_TARGET,
                }
            ],
        },
        {"type": "finish", "finishReason": "stop", "messageMetadata": DONE},
    ]


def test_the_stream_bytes_are_one_data_line_per_chunk_then_done():
    rows: list[Row] = [TWO_STEPS[0], (2, "text", {"text": "Hi"}), (3, "done", DONE)]
    assert stream_bytes(rows) == (
        b'data: {"type":"start","messageId":"' + T.encode() + b'","messageMetadata":{"turn_id":"' + T.encode()
        + b'","session_id":"' + S.encode() + b'"}}\n\n'
        b'data: {"type":"start-step"}\n\n'
        b'data: {"type":"text-start","id":"text-2"}\n\n'
        b'data: {"type":"text-delta","id":"text-2","delta":"Hi"}\n\n'
        b'data: {"type":"text-end","id":"text-2"}\n\n'
        b'data: {"type":"finish-step"}\n\n'
        b'data: {"type":"finish","finishReason":"stop","messageMetadata":{"log_id":"' + T.encode()
        + b'","session_id":"' + S.encode() + b'","skipped_citations":{},"stop_reason":"end_turn"}}\n\n'
        b"data: [DONE]\n\n"
    )  # fmt: skip
    assert DONE_FRAME == b"data: [DONE]\n\n"
    # A turn not over yet gets no [DONE]: the stream goes on.
    assert stream_bytes(rows[:2]).endswith(b'"delta":"Hi"}\n\n')


def test_line_breaks_json_leaves_raw_are_escaped_and_the_text_is_unchanged():
    frame = format_chunk({"type": "text-delta", "id": "text-2", "delta": "a\u2028b\u2029c\x85d 💳 \\\u2028"})
    assert frame == (
        b'data: {"type":"text-delta","id":"text-2","delta":"a\\u2028b\\u2029c\\u0085d '
        + "💳".encode()
        + b' \\\\\\u2028"}\n\n'
    )
    assert frame.decode().splitlines()[0].startswith("data: ")
    assert len(frame.decode().splitlines()) == 2  # the data line and the blank line, whoever splits them
    assert json.loads(frame[len(b"data: ") :])["delta"] == "a\u2028b\u2029c\x85d 💳 \\\u2028"


def test_a_lone_surrogate_becomes_the_replacement_character_instead_of_raising():
    assert format_chunk({"type": "text-delta", "id": "t", "delta": "a\ud800b"}) == (
        b'data: {"type":"text-delta","id":"t","delta":"a' + "\ufffd".encode() + b'b"}\n\n'
    )


# --- the end: done, error ---------------------------------------------------------------------------------------


def test_a_failed_turn_ends_with_the_error_part_then_finish_and_nothing_after():
    failure = {"type": "overloaded", "message": "The assistant is busy right now. Please try again in a minute."}
    stream = UIMessageStream()
    rows: list[Row] = [
        TWO_STEPS[0],
        (2, "text", {"text": "Looking"}),
        (3, "error", {"error": failure}),
        (4, "text", {"text": "!"}),
    ]
    assert stream.feed(rows) == [
        START,
        {"type": "start-step"},
        {"type": "text-start", "id": "text-2"},
        {"type": "text-delta", "id": "text-2", "delta": "Looking"},
        {"type": "text-end", "id": "text-2"},
        {"type": "finish-step"},
        {"type": "error", "errorText": "The assistant is busy right now. Please try again in a minute."},
        {"type": "finish", "finishReason": "error", "messageMetadata": {"error": failure}},
    ]
    assert stream.ended
    assert stream.feed([(5, "text", {"text": "more"})]) == []


def test_a_turn_that_fails_before_any_output_has_no_step():
    failure = {"type": "interrupted", "message": "This answer was interrupted. Please ask again."}
    assert UIMessageStream().feed([TWO_STEPS[0], (2, "error", {"error": failure})]) == [
        START,
        {"type": "error", "errorText": "This answer was interrupted. Please ask again."},
        {"type": "finish", "finishReason": "error", "messageMetadata": {"error": failure}},
    ]


@pytest.mark.parametrize(
    ("stop_reason", "reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("pause_turn", "stop"),
        ("refusal", "content-filter"),
        ("tool_use", "tool-calls"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("something_new", "other"),
        (None, "other"),
    ],
)
def test_finish_reasons_follow_the_anthropic_provider(stop_reason, reason):
    assert finish_reason(stop_reason) == reason


def test_the_message_event_and_unknown_names_give_nothing():
    stream = UIMessageStream()
    assert stream.feed([(1, "message", {"content": []}), (2, "a_later_event", {})]) == []
    assert not stream.ended
