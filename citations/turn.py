"""Turn records: validation of the input format (docs/turns.md#the-record).

A *turn record* is the JSON a recorder, an import file or a finished live
turn gives for one turn: the user message and the events (tool calls and
model steps) in the order they happened. This module is pure:
`parse_turn_record` checks a record whole and returns typed values. What the
turn stores is computed by `citations.assembler`; the Django side
(`chat.services`) only saves the result.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from citations.citable import tool_spec
from citations.json_checks import TurnRecordError, expect, optional_str, required
from citations.text import text_problem
from citations.uuids import parse_uuid

__all__ = [
    "AssistantEvent",
    "Event",
    "ToolCallEvent",
    "TurnRecord",
    "TurnRecordError",
    "parse_turn_record",
]

PROMPT_VERSIONS = ("v5", "legacy")
TITLE_MAX_LENGTH = 500
MODEL_MAX_LENGTH = 100
USERNAME_MAX_LENGTH = 150

#: Citation types recorded (docs/turns.md); any other type is counted and skipped.
SEARCH_RESULT_LOCATION = "search_result_location"
WEB_SEARCH_RESULT_LOCATION = "web_search_result_location"
RECORDED_CITATION_TYPES = (SEARCH_RESULT_LOCATION, WEB_SEARCH_RESULT_LOCATION)


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """One tool call: the tool's name, its input and raw output (JSON objects)."""

    id: str
    name: str
    input: Mapping[str, Any]
    output: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class AssistantEvent:
    """The final Anthropic Messages API response object of one model step."""

    message: Mapping[str, Any]


Event = ToolCallEvent | AssistantEvent


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """A validated turn record (docs/turns.md). `user` is None when absent."""

    id: uuid.UUID | None
    session_id: uuid.UUID
    session_title: str | None
    user: str | None
    prompt_version: str
    created_at: dt.datetime | None
    user_message: str
    events: tuple[Event, ...]


# --- validation -------------------------------------------------------------


def _uuid(value: object, path: str) -> uuid.UUID:
    expect(value, str, path, "a UUID string")
    parsed = parse_uuid(value)
    if parsed is None:
        raise TurnRecordError(path, f"not a UUID (8-4-4-4-12 hex digits): {value!r}")
    return parsed


def _datetime(value: object, path: str) -> dt.datetime:
    text = expect(value, str, path, "an ISO 8601 date-time string")
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        raise TurnRecordError(path, f"not an ISO 8601 date-time: {value!r}") from None
    # A time without an offset is taken as UTC, the zone the recorder runs in.
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    try:
        # In UTC, as stored: 9999-12-31T23:59-05:00 is past what either
        # database (and Python) can hold, and would break every later read.
        return parsed.astimezone(dt.UTC)
    except OverflowError:
        raise TurnRecordError(path, f"out of range once in UTC: {value!r}") from None


def _check_storable_text(record: object) -> None:
    """Refuse strings PostgreSQL cannot store: NUL characters and lone
    surrogates (JSON allows both as escapes; jsonb and text columns do not).
    Checks every key and string value, iteratively (no recursion limit), so
    both databases accept or refuse the same records."""
    if _all_text_storable(record):
        return
    stack: list[tuple[object, str]] = [(record, "record")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            problem = text_problem(value)
            if problem:
                raise TurnRecordError(path.removeprefix("record.") if path != "record" else path, problem)
        elif isinstance(value, dict):
            for key, item in value.items():
                child = f"{path}.{key}" if isinstance(key, str) else path
                if isinstance(key, str) and text_problem(key):
                    raise TurnRecordError(child.removeprefix("record."), f"key {text_problem(key)}")
                stack.append((item, child))
        elif isinstance(value, list):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(value))


def _all_text_storable(record: object) -> bool:
    """Fast check for the usual record: encode it once in C and look for a
    NUL escape or a surrogate. False means "walk it to find the path" (also
    when the record holds values JSON cannot encode, or a literal `\\u0000`)."""
    try:
        # orjson refuses lone surrogates (and anything else it cannot encode,
        # such as integers past 64 bits) with TypeError; it is ~8x faster
        # than the stdlib here, which matters on 100,000-row SQL outputs.
        encoded = orjson.dumps(record)
    except (TypeError, ValueError, RecursionError):
        return False
    return b"\\u0000" not in encoded


def _check_tool_output(name: str, tool_input: Mapping[str, Any], output: Mapping[str, Any], path: str) -> None:
    """Check the output fields that docs/citable.md reads for `name` (its `ToolSpec.check_output`)."""
    spec = tool_spec(name)
    if spec is not None:
        spec.check_output(tool_input, output, path)
    # Any other tool gives no citable content: its output is not read.


def _check_citation(value: object, path: str) -> None:
    citation = expect(value, dict, path, "an object")
    kind = expect(citation.get("type"), str, f"{path}.type", "a string")
    if kind not in RECORDED_CITATION_TYPES:
        return  # other citation types are counted and skipped, not checked (docs/turns.md#what-a-turn-stores)
    # A web search citation is known by its `url`; ours by `source`.
    key = "url" if kind == WEB_SEARCH_RESULT_LOCATION else "source"
    expect(citation.get(key), str, f"{path}.{key}", "a string")
    expect(citation.get("cited_text"), str, f"{path}.cited_text", "a string")
    optional_str(citation, "title", path)


def _check_message(value: object, path: str) -> None:
    message = expect(value, dict, path, "an Anthropic message object")
    role = message.get("role", "assistant")
    if role != "assistant":
        raise TurnRecordError(f"{path}.role", f"expected 'assistant', got {role!r}")
    model = message.get("model")
    if model is not None and len(expect(model, str, f"{path}.model", "a string")) > MODEL_MAX_LENGTH:
        raise TurnRecordError(f"{path}.model", f"longer than {MODEL_MAX_LENGTH} characters")
    content = expect(message.get("content"), list, f"{path}.content", "a list of content blocks")
    for i, item in enumerate(content):
        block_path = f"{path}.content[{i}]"
        block = expect(item, dict, block_path, "a content block object")
        expect(block.get("type"), str, f"{block_path}.type", "a string")
        if block["type"] != "text":
            continue
        expect(block.get("text"), str, f"{block_path}.text", "a string")
        citations = block.get("citations")
        if citations is None:
            continue
        expect(citations, list, f"{block_path}.citations", "a list or null")
        for j, citation in enumerate(citations):
            _check_citation(citation, f"{block_path}.citations[{j}]")


def _parse_event(value: object, path: str) -> Event:
    event = expect(value, dict, path, "an event object")
    kind = event.get("type")
    if kind == "tool_call":
        call_id = expect(event.get("id"), str, f"{path}.id", "a string")
        name = expect(event.get("name"), str, f"{path}.name", "a string")
        tool_input = expect(event.get("input"), dict, f"{path}.input", "an object")
        output = expect(event.get("output"), dict, f"{path}.output", "an object")
        _check_tool_output(name, tool_input, output, f"{path}.output")
        return ToolCallEvent(call_id, name, tool_input, output)
    if kind == "assistant":
        _check_message(event.get("message"), f"{path}.message")
        return AssistantEvent(event["message"])
    raise TurnRecordError(f"{path}.type", f"unknown event type {kind!r} (expected 'tool_call' or 'assistant')")


def parse_turn_record(record: object, *, user_given: bool = False) -> TurnRecord:
    """Check a turn record whole and return it typed (docs/turns.md).

    `record` is decoded JSON. With `user_given` the caller supplies the user,
    so the record's `user` is not required (and not read). Raises
    `TurnRecordError` naming the JSON path of the first problem found; it
    never returns a partly checked record.
    """
    expect(record, dict, "record", "a turn record object")
    assert isinstance(record, dict)
    session = required(record, "session", dict, "session", "an object with an 'id'")
    session_id = _uuid(required(session, "id", str, "session.id", "a UUID string"), "session.id")
    title = session.get("title")
    if title is not None:
        expect(title, str, "session.title", "a string or null")
        if len(title) > TITLE_MAX_LENGTH:
            raise TurnRecordError("session.title", f"longer than {TITLE_MAX_LENGTH} characters")

    user = None
    if not user_given:
        user = required(record, "user", str, "user", "a username string")
        if not user or len(user) > USERNAME_MAX_LENGTH:
            raise TurnRecordError("user", f"expected a username of 1 to {USERNAME_MAX_LENGTH} characters")

    if "prompt_version" not in record:
        raise TurnRecordError("prompt_version", "missing (expected 'v5' or 'legacy')")
    prompt_version = record["prompt_version"]
    if prompt_version not in PROMPT_VERSIONS:
        raise TurnRecordError("prompt_version", f"expected 'v5' or 'legacy', got {prompt_version!r}")
    user_message = required(record, "user_message", str, "user_message", "a string")
    record_id = _uuid(record["id"], "id") if record.get("id") is not None else None
    created_at = _datetime(record["created_at"], "created_at") if record.get("created_at") is not None else None

    events = required(record, "events", list, "events", "a list")
    _check_storable_text(record)
    parsed = tuple(_parse_event(event, f"events[{i}]") for i, event in enumerate(events))
    return TurnRecord(
        id=record_id,
        session_id=session_id,
        session_title=title,
        user=user,
        prompt_version=prompt_version,
        created_at=created_at,
        user_message=user_message,
        events=parsed,
    )
