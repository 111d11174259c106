"""Every turn vector and example turn, through the turn assembler, then the AI SDK stream (citations/ai_sdk.py):
the chunks carry what the turn stores. Pure: no database, no HTTP.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from citations.ai_sdk import UIMessageStream, source_part
from citations.assembler import assemble_record
from citations.turn import parse_turn_record
from tests.ai_sdk_support import turn_log
from tests.cases import golden_params, load_cases, without_support

TURN_CASES = load_cases("turns.json")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "turns"
EXAMPLE_RECORDS = [
    pytest.param(record, id=f"{path.name}[{index}]")
    for path in sorted(EXAMPLES.glob("*.json"))
    for index, record in enumerate(json.loads(path.read_text(encoding="utf-8")))
]


def _parts(chunks, kind):
    return [chunk for chunk in chunks if chunk["type"] == kind]


def check_projection(record, expect, *, support=True):
    """The chunks carry what the turn stores: text, inline citations (targets and, unless `support` is False
    for a golden case that predates it, support included), summary, sources."""
    chunks = UIMessageStream().feed(turn_log(record))
    assert "".join(chunk["delta"] for chunk in _parts(chunks, "text-delta")) == expect["response"]
    data = [chunk["data"] for chunk in _parts(chunks, "data-citation")]
    assert (data if support else without_support(data)) == expect["inline_citations"]
    assert [chunk["data"] for chunk in _parts(chunks, "data-citations_summary")] == [expect["citations"]]
    sources = list(dict.fromkeys(citation["source"] for citation in expect["inline_citations"]))
    source_parts = [chunk for chunk in chunks if chunk["type"] in ("source-url", "source-document")]
    assert [part["sourceId"] for part in source_parts] == sources
    first: dict[str, Any] = {}
    for citation in expect["inline_citations"]:
        first.setdefault(citation["source"], citation)
    assert source_parts == [source_part(first[source]) for source in sources]
    # Well formed: steps and text parts open and close in turn, the stream ends with finish.
    depth, text = 0, None
    for chunk in chunks:
        kind = chunk["type"]
        if kind == "start-step":
            assert depth == 0 and text is None
            depth = 1
        elif kind == "finish-step":
            assert depth == 1 and text is None
            depth = 0
        elif kind == "text-start":
            assert depth == 1 and text is None
            text = chunk["id"]
        elif kind == "text-delta":
            assert chunk["id"] == text
        elif kind == "text-end":
            assert chunk["id"] == text
            text = None
    assert depth == 0 and chunks[0]["type"] == "start" and chunks[-1]["type"] == "finish"
    return chunks


@pytest.mark.parametrize("case", golden_params(TURN_CASES))
def test_each_turn_vector_streams_what_it_stores(case):
    chunks = check_projection(case["record"], case["expect"], support=False)
    tool_calls = [event for event in case["record"]["events"] if event["type"] == "tool_call"]
    assert [chunk["toolCallId"] for chunk in _parts(chunks, "tool-input-available")] == [e["id"] for e in tool_calls]
    assert [chunk["toolCallId"] for chunk in _parts(chunks, "tool-output-available")] == [e["id"] for e in tool_calls]


@pytest.mark.parametrize("record", EXAMPLE_RECORDS)
def test_each_example_turn_streams_what_it_stores(record):
    stored = assemble_record(parse_turn_record(record, user_given=True).events)
    expect = {
        "response": stored.response,
        "citations": stored.citations,
        "inline_citations": stored.inline_citations,
    }
    check_projection(record, expect)
