"""The AI SDK stream of a live turn (citations/ai_sdk.py, docs/live.md#the-ai-sdk-stream-protocolai-sdk).

Pure: no database, no HTTP. Expected chunk lists are written out by hand.
"""

from __future__ import annotations

import json

import pytest

from citations.ai_sdk import (
    DONE_FRAME,
    TOOL_ERROR_TEXT,
    Row,
    UIMessageStream,
    apply_rewinds,
    finish_reason,
    format_chunk,
    source_part,
    stream_bytes,
)

T, S = "5b0f3c1e-8a47-4d7e-9a0b-1c2d3e4f5a6b", "0b7e4a1c-3d2f-4e5a-8b9c-1d2e3f4a5b6c"
CARDS = "silvia://your-account/credit-card"
CARDS_TARGET = {
    "kind": "accounts",
    "accounts": [
        {"accountId": "CARDaaaaaaaaaaaaaaaa1", "provider": "plaid"},
        {"accountId": "CARDbbbbbbbbbbbbbbbb2", "provider": "plaid"},
    ],
}
CARDS_CITATION = {
    "source": CARDS,
    "title": "Credit card",
    "cited_text": "account_name: Credit card; balance: 1200",
    "start": 22,
    "end": 28,
    "target": CARDS_TARGET,
}
DONE = {"log_id": T, "session_id": S, "skipped_citations": {}, "stop_reason": "end_turn"}

#: A turn of two model steps with a tool round between them (ids as the log numbers them).
TWO_STEPS: list[Row] = [
    (1, "turn", {"turn_id": T, "session_id": S}),
    (2, "text", {"text": "Let me look."}),
    (3, "tool_call", {"id": "toolu_1", "name": "execute_sql", "input": {"query": "cards"}}),
    (
        4,
        "tool_result",
        {
            "id": "toolu_1",
            "name": "execute_sql",
            "sources": [{"source": CARDS, "title": "Credit card", "target": CARDS_TARGET}],
            "is_error": False,
        },
    ),
    (5, "text", {"text": "\n\nYou owe "}),
    (6, "text", {"text": "$1,500"}),
    (7, "citation", {"citation": CARDS_CITATION}),
    (8, "text", {"text": " in total."}),
    (9, "citations_summary", {"citations": [{k: v for k, v in CARDS_CITATION.items() if k not in ("start", "end")}]}),
    (10, "message", {"type": "message", "role": "assistant", "content": [], "stop_reason": "end_turn"}),
    (11, "done", DONE),
]


def _document(source, title):
    return {"type": "source-document", "sourceId": source, "mediaType": "text/plain", "title": title}


def _url(source, title):
    return {"type": "source-url", "sourceId": source, "url": source, "title": title}


START = {"type": "start", "messageId": T, "messageMetadata": {"turn_id": T, "session_id": S}}
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


# --- sources: one per source, source-url when the citation has an http(s) URL ---------------------------------


def _cite(source, target=None, title="T"):
    citation = {"source": source, "title": title, "cited_text": "x", "start": 0, "end": 1}
    return citation if target is None else {**citation, "target": target}


ACCOUNT = {"kind": "account", "accountId": "CHKaaaaaaaaaaaaaaaaa1", "provider": "plaid"}


@pytest.mark.parametrize(
    ("citation", "part"),
    [
        pytest.param(
            _cite("https://example.org/a", {"kind": "web", "url": "https://example.org/a"}),
            _url("https://example.org/a", "T"),
            id="web",
        ),
        pytest.param(
            _cite("https://www.irs.gov/p590a", {"kind": "tax_reference", "url": "https://www.irs.gov/p590a"}),
            _url("https://www.irs.gov/p590a", "T"),
            id="tax_reference with a url",
        ),
        pytest.param(
            _cite("https://ecfr.gov/x", {"kind": "mortgage_reference", "url": "https://ecfr.gov/x"}, title=None),
            {"type": "source-url", "sourceId": "https://ecfr.gov/x", "url": "https://ecfr.gov/x"},
            id="mortgage_reference with a url, null title: no title key",
        ),
        pytest.param(
            _cite("silvia://credit-card-corpus/a.md", {"kind": "card_document", "url": None}),
            _document("silvia://credit-card-corpus/a.md", "T"),
            id="card_document with url null",
        ),
        pytest.param(
            _cite("silvia://tax-authority/n.md", {"kind": "tax_reference", "url": None}, title=None),
            _document("silvia://tax-authority/n.md", "silvia://tax-authority/n.md"),
            id="tax_reference with url null, null title: the source stands in",
        ),
        pytest.param(
            _cite("silvia://your-account/checking", ACCOUNT),
            _document("silvia://your-account/checking", "T"),
            id="account",
        ),
        pytest.param(
            _cite(CARDS, CARDS_TARGET),
            _document(CARDS, "T"),
            id="accounts",
        ),
        pytest.param(
            _cite("silvia://your-portfolio", {"kind": "portfolio"}),
            _document("silvia://your-portfolio", "T"),
            id="portfolio",
        ),
        pytest.param(
            _cite("silvia://market-data/finnhub/AAPL", {"kind": "market_data", "ticker": "AAPL"}),
            _document("silvia://market-data/finnhub/AAPL", "T"),
            id="market_data",
        ),
        pytest.param(
            _cite("silvia://analysis", {"kind": "analysis"}),
            _document("silvia://analysis", "T"),
            id="analysis",
        ),
        pytest.param(
            _cite("silvia://search/search_web"),
            _document("silvia://search/search_web", "T"),
            id="untyped",
        ),
        pytest.param(
            _cite("https://www.irs.gov/roth"),
            _url("https://www.irs.gov/roth", "T"),
            id="untyped with an https source: the source is the url",
        ),
        pytest.param(
            _cite("ftp://example.org/a", {"kind": "web", "url": "ftp://example.org/a"}),
            _document("ftp://example.org/a", "T"),
            id="a url that is not http(s) is no link",
        ),
    ],
)
def test_the_source_part_of_each_target_family(citation, part):
    assert source_part(citation) == part


def test_each_source_is_sent_once_and_every_citation_has_its_data_part():
    web = _cite("https://example.org/a", {"kind": "web", "url": "https://example.org/a"})
    later = {**web, "cited_text": "y", "start": 3, "end": 5}
    rows: list[Row] = [TWO_STEPS[0], (2, "citation", {"citation": web}), (3, "citation", {"citation": later})]
    assert UIMessageStream().feed(rows) == [
        START,
        {"type": "start-step"},
        _url("https://example.org/a", "T"),
        {"type": "data-citation", "data": web},
        {"type": "data-citation", "data": later},
    ]


# --- tools ------------------------------------------------------------------------------------------------------


def _call(seq, tool_id):
    return (seq, "tool_call", {"id": tool_id, "name": "execute_sql", "input": {"query": tool_id}})


def _result(seq, tool_id, is_error=False):
    return (seq, "tool_result", {"id": tool_id, "name": "execute_sql", "sources": [], "is_error": is_error})


def _input(tool_id):
    return {
        "type": "tool-input-available",
        "toolCallId": tool_id,
        "toolName": "execute_sql",
        "input": {"query": tool_id},
        "providerExecuted": True,
    }


def test_a_call_after_a_result_starts_the_next_step_and_a_failed_call_is_an_output_error():
    rows: list[Row] = [
        TWO_STEPS[0],
        _call(2, "a"),
        _call(3, "b"),
        _result(4, "a"),
        _result(5, "b", is_error=True),
        _call(6, "c"),
        _result(7, "c"),
        _result(8, "never-called"),
        (9, "text", {"text": "Done."}),
    ]
    assert UIMessageStream().feed(rows) == [
        START,
        {"type": "start-step"},
        _input("a"),
        _input("b"),
        {"type": "tool-output-available", "toolCallId": "a", "output": {"sources": []}},
        {"type": "tool-output-error", "toolCallId": "b", "errorText": TOOL_ERROR_TEXT},
        {"type": "finish-step"},
        {"type": "start-step"},
        _input("c"),
        {"type": "tool-output-available", "toolCallId": "c", "output": {"sources": []}},
        {"type": "finish-step"},
        {"type": "start-step"},
        {"type": "text-start", "id": "text-9"},
        {"type": "text-delta", "id": "text-9", "delta": "Done."},
    ]
    assert TOOL_ERROR_TEXT == "The tool call failed."


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
