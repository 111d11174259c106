"""Rewinds in the AI SDK stream (citations/ai_sdk.py, docs/live.md#the-ai-sdk-stream-protocolai-sdk): what each
rewind drops from a replay, in one page or across pages, and live: a data-rewind part for chunks sent
already, nothing for events not sent yet.

Pure: no database, no HTTP. Expected chunk lists are written out by hand."""

from __future__ import annotations

from citations.ai_sdk import Row, UIMessageStream, apply_rewinds
from tests.citations.ai_sdk_stream_support import DONE, START, TWO_STEPS, _call, _cite, _document, _input, _result

# --- rewind -----------------------------------------------------------------------------------------------------

REWOUND: list[Row] = [
    TWO_STEPS[0],
    (2, "text", {"text": "Let me look."}),
    _call(3, "toolu_1"),
    _result(4, "toolu_1"),
    (5, "text", {"text": "\n\nOld answer"}),
    (6, "citation", {"citation": _cite("silvia://analysis", {"kind": "analysis"})}),
    (7, "rewind", {"to": 4, "answer": "Let me look."}),
    (8, "text", {"text": "\n\nNew answer"}),
    (9, "done", DONE),
]

FIRST_STEP = [
    START,
    {"type": "start-step"},
    {"type": "text-start", "id": "text-2"},
    {"type": "text-delta", "id": "text-2", "delta": "Let me look."},
    {"type": "text-end", "id": "text-2"},
    _input("toolu_1"),
    {"type": "tool-output-available", "toolCallId": "toolu_1", "output": {"sources": []}},
]
NEW_STEP = [
    {"type": "start-step"},
    {"type": "text-start", "id": "text-8"},
    {"type": "text-delta", "id": "text-8", "delta": "\n\nNew answer"},
    {"type": "text-end", "id": "text-8"},
    {"type": "finish-step"},
    {"type": "finish", "finishReason": "stop", "messageMetadata": DONE},
]


def test_apply_rewinds_drops_what_each_rewind_drops():
    assert apply_rewinds(REWOUND) == [*REWOUND[:4], *REWOUND[7:]]
    nested: list[Row] = [
        *REWOUND[:7],
        (8, "text", {"text": "x"}),
        (9, "rewind", {"to": 1, "answer": ""}),
        (10, "text", {"text": "y"}),
    ]
    assert apply_rewinds(nested) == [REWOUND[0], (10, "text", {"text": "y"})]


def test_a_replay_applies_its_rewinds_before_sending():
    assert UIMessageStream().feed(REWOUND) == [*FIRST_STEP, {"type": "finish-step"}, *NEW_STEP]


def test_a_replay_read_in_pages_applies_a_rewind_across_them():
    stream = UIMessageStream()
    assert stream.feed(REWOUND[:6], hold=True) == []
    assert stream.feed(REWOUND[6:]) == [*FIRST_STEP, {"type": "finish-step"}, *NEW_STEP]


def test_a_live_rewind_of_chunks_sent_already_is_a_data_rewind_part():
    stream = UIMessageStream()
    assert stream.feed(REWOUND[:6]) == [
        *FIRST_STEP,
        {"type": "finish-step"},
        {"type": "start-step"},
        {"type": "text-start", "id": "text-5"},
        {"type": "text-delta", "id": "text-5", "delta": "\n\nOld answer"},
        {"type": "text-end", "id": "text-5"},
        _document("silvia://analysis", "T"),
        {"type": "data-citation", "data": _cite("silvia://analysis", {"kind": "analysis"})},
    ]
    assert stream.feed(REWOUND[6:]) == [
        {"type": "finish-step"},
        {"type": "data-rewind", "data": {"to": 4, "answer": "Let me look."}},
        *NEW_STEP,
    ]


def test_a_live_rewind_of_events_not_sent_yet_says_nothing():
    stream = UIMessageStream()
    assert stream.feed(REWOUND[:4]) == FIRST_STEP
    assert stream.feed(REWOUND[4:]) == [{"type": "finish-step"}, *NEW_STEP]
