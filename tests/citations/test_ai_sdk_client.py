"""The AI SDK stream read by the real client: the `ai` package's DefaultChatTransport and readUIMessageStream
(tests/js/read_ui_stream.mjs, `ai` pinned in package.json) against a loopback server that answers with bytes
`citations.ai_sdk` made from a hand-written event log. The message the client builds carries the log's text,
sources and targets. Needs node and `npm ci`: skipped without them, failed under CI.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from citations.ai_sdk import Row, UIMessageStream, apply_rewinds, format_chunk, source_part, stream_bytes
from tests.ai_sdk_support import READER, ROOT, canned_server, need_node, read_ui_message, turn_log
from tests.cases import case_ids, load_cases

T, S = "5b0f3c1e-8a47-4d7e-9a0b-1c2d3e4f5a6b", "0b7e4a1c-3d2f-4e5a-8b9c-1d2e3f4a5b6c"
IRS = "https://www.irs.gov/retirement-plans/ira-contribution-limits"
CHECKING = "silvia://your-account/checking"
WEB = {"kind": "web", "url": IRS}
ACCOUNT = {"kind": "account", "accountId": "CHKaaaaaaaaaaaaaaaaa1", "provider": "plaid"}
LIMIT = {
    "source": IRS,
    "title": "IRA limits",
    "cited_text": "The limit is $7,000.",
    "start": 14,
    "end": 33,
    "target": WEB,
}
HELD = {
    "source": CHECKING,
    "title": "Checking",
    "cited_text": "balance: 5000",
    "start": 33,
    "end": 66,
    "target": ACCOUNT,
}
SUMMARY = [{k: v for k, v in c.items() if k not in ("start", "end")} for c in (LIMIT, HELD)]
DONE = {"log_id": T, "session_id": S, "skipped_citations": {}, "stop_reason": "end_turn"}
SEARCH_SOURCES = [{"source": IRS, "title": "IRA limits", "target": WEB}]
SQL_SOURCES = [{"source": CHECKING, "title": "Checking", "target": ACCOUNT}]

TURN: list[Row] = [
    (1, "turn", {"turn_id": T, "session_id": S}),
    (2, "text", {"text": "Let me look."}),
    (3, "tool_call", {"id": "toolu_1", "name": "search_web", "input": {"query": "ira limit"}}),
    (4, "tool_call", {"id": "toolu_2", "name": "execute_sql", "input": {"query": "checking"}}),
    (5, "tool_result", {"id": "toolu_1", "name": "search_web", "sources": SEARCH_SOURCES, "is_error": False}),
    (6, "tool_result", {"id": "toolu_2", "name": "execute_sql", "sources": SQL_SOURCES, "is_error": False}),
    (7, "text", {"text": "\n\nThe limit is $7,000"}),
    (8, "citation", {"citation": LIMIT}),
    (9, "text", {"text": " and you hold $5,000 in checking."}),
    (10, "citation", {"citation": HELD}),
    (11, "citations_summary", {"citations": SUMMARY}),
    (12, "message", {"type": "message", "role": "assistant", "content": [], "stop_reason": "end_turn"}),
    (13, "done", DONE),
]

#: The UIMessage the AI SDK builds from TURN, written out by hand.
MESSAGE = {
    "id": T,
    "role": "assistant",
    "metadata": {"turn_id": T, "session_id": S, "log_id": T, "skipped_citations": {}, "stop_reason": "end_turn"},
    "parts": [
        {"type": "step-start"},
        {"type": "text", "text": "Let me look.", "state": "done"},
        {
            "type": "tool-search_web",
            "toolCallId": "toolu_1",
            "state": "output-available",
            "input": {"query": "ira limit"},
            "output": {"sources": SEARCH_SOURCES},
            "providerExecuted": True,
        },
        {
            "type": "tool-execute_sql",
            "toolCallId": "toolu_2",
            "state": "output-available",
            "input": {"query": "checking"},
            "output": {"sources": SQL_SOURCES},
            "providerExecuted": True,
        },
        {"type": "step-start"},
        {"type": "text", "text": "\n\nThe limit is $7,000", "state": "done"},
        {"type": "source-url", "sourceId": IRS, "url": IRS, "title": "IRA limits"},
        {"type": "data-citation", "data": LIMIT},
        {"type": "text", "text": " and you hold $5,000 in checking.", "state": "done"},
        {"type": "source-document", "sourceId": CHECKING, "mediaType": "text/plain", "title": "Checking"},
        {"type": "data-citation", "data": HELD},
        {"type": "data-citations_summary", "data": SUMMARY},
    ],
}


def check_message(message, rows):
    """The message holds what the log says, rewinds applied: text, sources, inline citations with targets."""
    held = apply_rewinds(rows)
    parts = message["parts"]
    assert "".join(p["text"] for p in parts if p["type"] == "text") == "".join(
        data["text"] for _, name, data in held if name == "text"
    )
    citations = [data["citation"] for _, name, data in held if name == "citation"]
    assert [p["data"] for p in parts if p["type"] == "data-citation"] == citations
    first: dict[str, Any] = {}
    for citation in citations:
        first.setdefault(citation["source"], citation)
    sources = [p for p in parts if p["type"] in ("source-url", "source-document")]
    assert sources == [source_part(citation) for citation in first.values()]


def test_a_posted_turn_builds_the_message_and_the_request_is_ours():
    # Keep-alive comments, as a quiet turn's stream sends them, are skipped by the client's parser.
    body = b": keep-alive\n\n" + stream_bytes(TURN)
    with canned_server(body) as server:
        result = read_ui_message(
            {
                "url": f"{server.url}/api/chat/sessions/{S}/turns/?protocol=ai-sdk",
                "headers": {"Authorization": "Token test-token"},
                "body": {"message": "What is my IRA limit?", "prompt_version": "v5"},
            }
        )
    assert result == {"status": "message", "message": MESSAGE, "errors": []}
    check_message(result["message"], TURN)
    [request] = server.requests
    assert request["method"] == "POST"
    assert request["path"] == f"/api/chat/sessions/{S}/turns/?protocol=ai-sdk"
    assert request["body"] == {"message": "What is my IRA limit?", "prompt_version": "v5"}
    assert request["headers"]["authorization"] == "Token test-token"
    assert request["headers"]["content-type"] == "application/json"


def test_a_reconnect_replays_with_the_rewind_applied():
    rewound: list[Row] = [
        *TURN[:6],
        (7, "text", {"text": "\n\nAn answer given up"}),
        (8, "rewind", {"to": 6, "answer": "Let me look."}),
        *((seq + 2, name, data) for seq, name, data in TURN[6:]),
    ]
    with canned_server(stream_bytes(rewound)) as server:
        result = read_ui_message(
            {"url": f"{server.url}/api/chat/turns/{T}/events?protocol=ai-sdk", "method": "GET", "headers": {}}
        )
    assert result == {"status": "message", "message": MESSAGE, "errors": []}
    check_message(result["message"], rewound)
    assert [(r["method"], r["path"], r["body"]) for r in server.requests] == [
        ("GET", f"/api/chat/turns/{T}/events?protocol=ai-sdk", None)
    ]


def test_a_live_rewind_leaves_a_data_rewind_part_in_the_message():
    stream = UIMessageStream()
    live: list[Row] = [*TURN[:9], (10, "rewind", {"to": 6, "answer": "Let me look."}), *TURN[9:]]
    chunks = stream.feed(live[:9]) + stream.feed(live[9:])
    body = b"".join(format_chunk(chunk) for chunk in chunks) + b"data: [DONE]\n\n"
    with canned_server(body) as server:
        message = read_ui_message({"url": server.url, "method": "GET"})["message"]
    rewinds = [part for part in message["parts"] if part["type"] == "data-rewind"]
    assert rewinds == [{"type": "data-rewind", "data": {"to": 6, "answer": "Let me look."}}]
    # What came before the rewind is still there: the client is told to reconnect, which replays.
    assert [p["text"] for p in message["parts"] if p["type"] == "text"] == [
        "Let me look.",
        "\n\nThe limit is $7,000",
        " and you hold $5,000 in checking.",
    ]


def test_a_failed_turn_reaches_the_client_as_its_error_text():
    failure = {"type": "overloaded", "message": "The assistant is busy right now. Please try again in a minute."}
    rows: list[Row] = [TURN[0], TURN[1], (3, "error", {"error": failure})]
    with canned_server(stream_bytes(rows)) as server:
        result = read_ui_message({"url": server.url, "body": {"message": "Hi"}})
    assert result == {
        "status": "message",
        "message": {
            "id": T,
            "role": "assistant",
            "metadata": {"turn_id": T, "session_id": S, "error": failure},
            "parts": [{"type": "step-start"}, {"type": "text", "text": "Let me look.", "state": "done"}],
        },
        "errors": ["The assistant is busy right now. Please try again in a minute."],
    }


def test_line_breaks_reach_the_client_unchanged():
    rows: list[Row] = [TURN[0], (2, "text", {"text": "a\u2028b\u2029c\x85d 💳"}), (3, "done", DONE)]
    with canned_server(stream_bytes(rows)) as server:
        message = read_ui_message({"url": server.url, "body": {"message": "Hi"}})["message"]
    assert [p["text"] for p in message["parts"] if p["type"] == "text"] == ["a\u2028b\u2029c\x85d 💳"]


def test_a_204_is_no_stream_to_resume():
    with canned_server(b"", status=204, headers={}) as server:
        result = read_ui_message({"url": server.url, "method": "GET"})
    assert result == {"status": "no-stream", "message": None, "errors": []}


def test_a_refused_post_is_an_error_holding_our_json_body():
    detail = json.dumps({"detail": "This session already has a turn running."}).encode()
    with canned_server(detail, status=409, headers={"Content-Type": "application/json"}) as server:
        done = subprocess.run(
            [need_node(), str(READER)],
            input=json.dumps({"url": server.url, "body": {"message": "Hi"}}).encode(),
            capture_output=True,
            timeout=60,
            cwd=ROOT,
            check=False,
        )
    assert done.returncode == 1
    assert json.loads(done.stderr.decode().split(": ", 1)[1]) == {"detail": "This session already has a turn running."}


def test_a_chunk_the_ai_sdk_refuses_fails_the_read():
    """The harness is no rubber stamp: a `text-delta` without its `delta` fails the ai package's schema."""
    body = b'data: {"type":"start"}\n\ndata: {"type":"text-start","id":"t"}\n\ndata: {"type":"text-delta","id":"t"}\n\n'
    with canned_server(body) as server:
        done = subprocess.run(
            [need_node(), str(READER)],
            input=json.dumps({"url": server.url, "body": {"message": "Hi"}}).encode(),
            capture_output=True,
            timeout=60,
            cwd=ROOT,
            check=False,
        )
    assert done.returncode == 1 and done.stdout == b""
    assert done.stderr.startswith(b"AI_TypeValidationError: ")


TURN_CASES = load_cases("turns.json")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "turns"
RECORDS = [
    *(pytest.param(case["record"], id=why) for case, why in zip(TURN_CASES, case_ids(TURN_CASES), strict=True)),
    *(
        pytest.param(record, id=f"{path.name}[{index}]")
        for path in sorted(EXAMPLES.glob("*.json"))
        for index, record in enumerate(json.loads(path.read_text(encoding="utf-8")))
    ),
]


@pytest.mark.parametrize("record", RECORDS)
def test_every_repository_turn_reads_back_whole(record):
    """Each turn vector and example, through the assembler, the projection and the real reader."""
    rows = turn_log(record)
    with canned_server(stream_bytes(rows)) as server:
        result = read_ui_message({"url": server.url, "body": {"message": record["user_message"]}})
    assert result["errors"] == []
    check_message(result["message"], rows)
    summary = [data["citations"] for _, name, data in rows if name == "citations_summary"]
    assert [p["data"] for p in result["message"]["parts"] if p["type"] == "data-citations_summary"] == summary
