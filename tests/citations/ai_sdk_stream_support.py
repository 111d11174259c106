"""What the tests of the AI SDK stream projection share (citations/ai_sdk.py): a turn of two steps and a tool
round as the log's events, the chunks it starts and ends with, and builders of citations, tool events and
source parts."""

from __future__ import annotations

from citations.ai_sdk import Row

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


START = {"type": "start", "messageId": T, "messageMetadata": {"turn_id": T, "session_id": S}}


# --- sources: one per source, source-url when the citation has an http(s) URL ---------------------------------


def _cite(source, target=None, title="T"):
    citation = {"source": source, "title": title, "cited_text": "x", "start": 0, "end": 1}
    return citation if target is None else {**citation, "target": target}


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
