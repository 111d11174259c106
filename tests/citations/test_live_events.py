"""Event names declared once (citations/live_events.py): the docs' table, the code and the schema agree."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from citations.live_events import (
    DATA_KEYS,
    LOG_ONLY_DATA_KEYS,
    LOG_ONLY_EVENTS,
    EventName,
    LogOnlyEventName,
    tool_call_event,
    tool_result_event,
)
from tests.ast_support import APPS as ALL_APPS
from tests.ast_support import docstring_ids

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / "citations" / "live_events.py"
APPS = ALL_APPS


def docs_event_table(header: str = "| event | data |") -> list[tuple[str, list[str] | None]]:
    """`(name, data keys)` per row of the docs/live.md table under `header` (the event table unless told);
    keys None when the data is no `{...}` object."""
    text = (ROOT / "docs" / "live.md").read_text(encoding="utf-8")
    assert text.count(header) == 1, header
    table = text.split(header, 1)[1].split("\n\n", 1)[0]
    rows = []
    for line in table.strip().splitlines()[1:]:
        name_cell, data_cell = (cell.strip() for cell in line.strip("|").split("|", 1))
        data = re.match(r"`(\{[^`]*\})`", data_cell)
        rows.append((name_cell.strip("`"), re.findall(r'"(\w+)"', data.group(1)) if data else None))
    return rows


def test_the_docs_event_table_lists_every_event_with_its_data_keys():
    assert docs_event_table() == [
        (name.value, list(keys) if keys is not None else None) for name, keys in DATA_KEYS.items()
    ]
    assert list(DATA_KEYS) == list(EventName)


def test_the_docs_log_only_table_lists_every_log_only_event_with_its_data_keys():
    """Events the log holds and our stream skips have a table of their own, so the event table stays what is sent."""
    assert docs_event_table("| log-only event | data |") == [
        (name.value, list(keys)) for name, keys in LOG_ONLY_DATA_KEYS.items()
    ]
    assert list(LOG_ONLY_DATA_KEYS) == list(LogOnlyEventName)
    assert set(LogOnlyEventName) == LOG_ONLY_EVENTS
    assert not {name.value for name in LogOnlyEventName} & {name.value for name in EventName}


def test_the_log_only_constructors_write_their_declared_keys():
    call = tool_call_event(tool_call_id="toolu_1", name="execute_sql", tool_input={"query": "q"})
    assert (call.name, dict(call.data)) == (
        LogOnlyEventName.TOOL_CALL,
        {"id": "toolu_1", "name": "execute_sql", "input": {"query": "q"}},
    )
    sources = [{"source": "silvia://your-portfolio", "title": "Your portfolio", "target": {"kind": "portfolio"}}]
    result = tool_result_event(tool_call_id="toolu_1", name="execute_sql", sources=sources)
    assert (result.name, dict(result.data)) == (
        LogOnlyEventName.TOOL_RESULT,
        {"id": "toolu_1", "name": "execute_sql", "sources": sources, "is_error": False},
    )
    failed = tool_result_event(tool_call_id="toolu_2", name="search_web", sources=[], is_error=True)
    assert dict(failed.data) == {"id": "toolu_2", "name": "search_web", "sources": [], "is_error": True}
    for event in (call, result):
        assert tuple(event.data) == LOG_ONLY_DATA_KEYS[LogOnlyEventName(event.name)]


def _literals_outside_dict_keys(tree: ast.AST) -> list[ast.Constant]:
    keys = {id(k) for node in ast.walk(tree) if isinstance(node, ast.Dict) for k in node.keys if k is not None}
    docstrings = docstring_ids(tree)
    # A keyword argument other than `name=`/`event=` is a label (`view="turn"`, a metric's), not an event.
    labels = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.keyword) and node.arg not in (None, "name", "event")
    }
    # A model's Meta names fields (`ordering = ["turn", "seq"]`), not events.
    meta = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.name == "Meta"
        for inner in ast.walk(node)
    }
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in keys | docstrings | meta | labels
    ]


# Where the words are the Anthropic format's, not our events': a content block or delta of type "text",
# a message `role`, LiveTurnStatus's "done", the Messages API's own stream `error` event.
_ANTHROPIC_FORMAT = {"text", "message", "error", "done"}
_EVENT_MODULES = [ROOT / "live", ROOT / "chat" / "api"]


# Migrations are frozen history: a field named `turn` there is a column, not an event.
@pytest.mark.parametrize(
    "path",
    [p for d in _EVENT_MODULES for p in sorted(d.rglob("*.py")) if "migrations" not in p.parts],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_event_name_literal_where_events_are_written_or_served(path):
    """The modules that write, store and serve events name them through `EventName` only.

    Event names that are also words of the Anthropic format (`text`, `message`, `error`) or a status (`done`) are
    allowed as dict keys only; the others (`turn`, `citation`, `citations_summary`, `rewind`) nowhere.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {name.value for name in EventName}
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
        for node in _literals_outside_dict_keys(tree)
        if node.value in names and node.value not in _ANTHROPIC_FORMAT
    ]
    assert found == []


def test_the_distinct_event_names_appear_in_no_other_app_module():
    distinct = {name.value for name in EventName} - _ANTHROPIC_FORMAT
    found = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if path == HOME or "migrations" in path.parts:
                continue
            for node in _literals_outside_dict_keys(ast.parse(path.read_text(encoding="utf-8"))):
                if node.value in distinct:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert found == []


def test_the_page_script_listens_for_exactly_the_events_there_are():
    """The browser cannot import `EventName`: ask.js's list and every name it compares with are held to it."""
    script = (ROOT / "pages" / "static" / "pages" / "ask.js").read_text(encoding="utf-8")
    listed = re.search(r"var EVENT_NAMES = \[([^\]]*)\];", script)
    assert listed is not None, "ask.js no longer declares EVENT_NAMES"
    assert sorted(re.findall(r'"(\w+)"', listed.group(1))) == sorted(name.value for name in EventName)
    compared = set(re.findall(r'\bname === "(\w+)"', script))
    assert compared and compared <= {name.value for name in EventName}


# --- the OpenAPI schema -------------------------------------------------------


@pytest.fixture
def schema(db):
    response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    return json.loads(response.content)


def test_every_operation_documents_401(schema):
    operations = [(path, method, op) for path, item in schema["paths"].items() for method, op in item.items()]
    assert len(operations) >= 4
    for path, method, operation in operations:
        assert "401" in operation["responses"], (path, method)
        assert operation["responses"]["401"]["headers"]["WWW-Authenticate"]["schema"]["enum"] == ["Token"]


def test_the_streams_are_described_event_by_event(schema):
    turns = schema["paths"]["/api/chat/sessions/{session_id}/turns/"]["post"]["responses"]["200"]["content"]
    events = schema["paths"]["/api/chat/turns/{turn_id}/events/"]["get"]["responses"]
    for stream in (turns["text/event-stream"]["schema"], events["200"]["content"]["text/event-stream"]["schema"]):
        variants = {v["properties"]["event"]["enum"][0]: v for v in stream["oneOf"]}
        assert list(variants) == [name.value for name in EventName]
        for name, keys in DATA_KEYS.items():
            data = variants[name.value]["properties"]["data"]
            assert data["type"] == "object"
            if keys is not None:
                assert list(data["properties"]) == list(keys) and data["required"] == list(keys)
        assert variants["citation"]["properties"]["data"]["properties"]["citation"]["properties"]["start"] == {
            "type": "integer",
            "minimum": 0,
        }
    assert "204" in events


def test_event_ids_have_a_minimum_of_zero(schema):
    parameters = schema["paths"]["/api/chat/turns/{turn_id}/events/"]["get"]["parameters"]
    by_name = {p["name"]: p for p in parameters}
    assert by_name["Last-Event-ID"]["in"] == "header" and by_name["after"]["in"] == "query"
    for name in ("Last-Event-ID", "after"):
        assert by_name[name]["schema"] == {"type": "integer", "minimum": 0}
