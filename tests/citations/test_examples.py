"""The example turns and corpus under examples/ stay valid and keep demonstrating what their README says.

Pure: no database. The last test replays every example through the turn assembly
(docs/citable.md, docs/registry.md, docs/turns.md).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path

import pytest

from citations.assembler import assemble_record
from citations.citable import to_citable_content
from citations.corpus import CORPUS_FOLDERS, read_corpus_document
from citations.turn import parse_turn_record

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TURN_FILES = sorted((EXAMPLES / "turns").glob("*.json"))
TARGET_KINDS = {
    "web",
    "tax_reference",
    "card_document",
    "mortgage_reference",
    "market_data",
    "analysis",
    "account",
    "accounts",
    "portfolio",
}
SECTION_4_TOOLS = {"execute_sql", "execute_python", "search_web", *CORPUS_FOLDERS}


def _records(path: Path) -> list[dict]:
    value = json.loads(path.read_text(encoding="utf-8"))
    return value if isinstance(value, list) else [value]


RECORDS = [(path.name, index, record) for path in TURN_FILES for index, record in enumerate(_records(path))]
RECORD_IDS = [f"{name}[{index}]" for name, index, _ in RECORDS]


def _tool_calls(record: dict) -> list[dict]:
    return [event for event in record["events"] if event["type"] == "tool_call"]


def _citations(record: dict):
    """Yield (event index, citation) for every citation of every text block."""
    for position, event in enumerate(record["events"]):
        if event["type"] != "assistant":
            continue
        for block in event["message"]["content"]:
            if block["type"] == "text":
                for citation in block.get("citations") or ():
                    yield position, citation


def test_every_example_file_is_json_with_records():
    assert TURN_FILES, "examples/turns holds no .json file"
    for path in TURN_FILES:
        records = _records(path)
        assert records and all(isinstance(record, dict) for record in records), path.name


def test_examples_cover_the_demo_brief():
    ids = [record["id"] for _, _, record in RECORDS]
    assert len(ids) == len(set(ids)) >= 14
    assert all(uuid.UUID(i) for i in ids)
    sessions = {record["session"]["id"]: record["user"] for _, _, record in RECORDS}
    assert len(sessions) >= 4
    assert set(sessions.values()) == {"maya", "sam"}
    versions = Counter(record["prompt_version"] for _, _, record in RECORDS)
    assert versions["legacy"] >= 2 and versions["v5"] > versions["legacy"]
    assert all(record["created_at"].startswith("2026-11-") for _, _, record in RECORDS)
    tools = {call["name"] for _, _, record in RECORDS for call in _tool_calls(record)}
    assert tools == SECTION_4_TOOLS


@pytest.mark.parametrize(("name", "index", "record"), RECORDS, ids=RECORD_IDS)
def test_tool_use_blocks_are_followed_by_their_calls(name, index, record):
    """A model step that calls tools ends with tool_use blocks; their tool_call events follow, same ids."""
    events = record["events"]
    for position, event in enumerate(events):
        if event["type"] != "assistant":
            continue
        message = event["message"]
        uses = [block["id"] for block in message["content"] if block["type"] == "tool_use"]
        if message["stop_reason"] == "tool_use":
            assert uses and message["content"][-1]["type"] == "tool_use"
            following = [e["id"] for e in events[position + 1 : position + 1 + len(uses)]]
            assert following == uses
        else:
            assert not uses
    assert events[-1]["type"] == "assistant" and events[-1]["message"]["stop_reason"] == "end_turn"


@pytest.mark.parametrize(("name", "index", "record"), RECORDS, ids=RECORD_IDS)
def test_reader_calls_return_the_example_corpus(name, index, record):
    for call in _tool_calls(record):
        if call["name"] in CORPUS_FOLDERS:
            read = read_corpus_document(call["name"], call["input"]["path"], root=EXAMPLES / "corpus")
            assert call["output"] == read, f"{call['id']} differs from examples/corpus"


@pytest.mark.parametrize(("name", "index", "record"), RECORDS, ids=RECORD_IDS)
def test_example_assembles_and_cites_only_its_own_sources(name, index, record):
    turn = parse_turn_record(record)
    assemble_record(turn.events)  # must not raise
    written: set[str] = set()
    cursor = 0
    for position, citation in _citations(record):
        for event in record["events"][cursor:position]:
            if event["type"] == "tool_call":
                written.update(
                    block.source for block in to_citable_content(event["name"], event["input"], event["output"])
                )
        cursor = position
        if citation["type"] == "search_result_location":
            assert citation["source"] in written, f"{citation['source']} was not written by an earlier tool call"


def test_examples_produce_every_target_kind_and_each_edge_case():
    kinds: set[str] = set()
    untyped = skipped = null_titles = 0
    for _, _, record in RECORDS:
        assembled = assemble_record(parse_turn_record(record).events)
        for citation in assembled.inline_citations:
            if "target" in citation:
                kinds.add(citation["target"]["kind"])
            else:
                untyped += 1
            null_titles += citation["title"] is None
        skipped += sum(1 for _, c in _citations(record) if c["type"] != "search_result_location")
    assert kinds == TARGET_KINDS
    assert untyped and skipped and null_titles
