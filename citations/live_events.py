"""The events a live turn streams: their names and payloads, declared once (docs/live.md#starting-a-turn).

Every SSE event the service writes is built here, by one constructor per
event; no other module spells an event name. `tests/citations/test_live_events.py`
checks the event table of docs/live.md against `EventName` and
`DATA_KEYS`, and `chat.api.schema` describes each payload in the OpenAPI
schema from the same names.

The log also holds events our own stream never sends: `LogOnlyEventName`
(docs/live.md#log-only-events), read by the AI SDK stream
(`citations.ai_sdk`) and skipped by ours, whose ids may then have gaps
(they only need to increase). docs/live.md has a table of their own for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "DATA_KEYS",
    "FINAL_EVENTS",
    "LOG_ONLY_DATA_KEYS",
    "LOG_ONLY_EVENTS",
    "EventName",
    "LogOnlyEventName",
    "StreamEvent",
    "citation_event",
    "citations_summary_event",
    "done_event",
    "error_event",
    "message_event",
    "rewind_event",
    "text_event",
    "tool_call_event",
    "tool_result_event",
    "turn_event",
]


class EventName(StrEnum):
    """The `event:` names, in the order docs/live.md lists them."""

    TURN = "turn"
    TEXT = "text"
    CITATION = "citation"
    CITATIONS_SUMMARY = "citations_summary"
    MESSAGE = "message"
    DONE = "done"
    ERROR = "error"
    REWIND = "rewind"


#: Events after which a turn's stream closes.
FINAL_EVENTS = frozenset({EventName.DONE, EventName.ERROR})

#: The keys of each event's `data` object; None for `message`, the raw Anthropic message.
DATA_KEYS: Mapping[EventName, tuple[str, ...] | None] = {
    EventName.TURN: ("turn_id", "session_id"),
    EventName.TEXT: ("text",),
    EventName.CITATION: ("citation",),
    EventName.CITATIONS_SUMMARY: ("citations",),
    EventName.MESSAGE: None,
    EventName.DONE: ("log_id", "session_id", "skipped_citations", "stop_reason"),
    EventName.ERROR: ("error",),
    EventName.REWIND: ("to", "answer"),
}


class LogOnlyEventName(StrEnum):
    """Events the log holds that our own stream does not send (docs/live.md#log-only-events)."""

    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"


#: The names a stream of our own format skips: it sends `EventName`s only.
LOG_ONLY_EVENTS = frozenset(LogOnlyEventName)

#: The keys of each log-only event's `data` object.
LOG_ONLY_DATA_KEYS: Mapping[LogOnlyEventName, tuple[str, ...]] = {
    LogOnlyEventName.TOOL_CALL: ("id", "name", "input"),
    LogOnlyEventName.TOOL_RESULT: ("id", "name", "sources", "is_error"),
}


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event before it gets its id: its name and its `data` (a JSON object)."""

    name: EventName | LogOnlyEventName
    data: Mapping[str, Any]


def turn_event(*, turn_id: str, session_id: str) -> StreamEvent:
    """First event of a turn: the ids a client reconnects with."""
    return StreamEvent(EventName.TURN, {"turn_id": turn_id, "session_id": session_id})


def text_event(text: str) -> StreamEvent:
    """A piece of the answer; the `text` events of a turn, joined, are its stored `response`."""
    return StreamEvent(EventName.TEXT, {"text": text})


def citation_event(citation: Mapping[str, Any]) -> StreamEvent:
    """One inline citation, complete: `{"source", "title", "cited_text", "start", "end", "target"?}`."""
    return StreamEvent(EventName.CITATION, {"citation": citation})


def citations_summary_event(citations: list[Mapping[str, Any]]) -> StreamEvent:
    """The turn's stored `citations`."""
    return StreamEvent(EventName.CITATIONS_SUMMARY, {"citations": citations})


def message_event(message: Mapping[str, Any]) -> StreamEvent:
    """The raw final Anthropic message of the last model step."""
    return StreamEvent(EventName.MESSAGE, message)


def done_event(*, log_id: str, session_id: str, skipped_citations: Mapping[str, int], stop_reason: str) -> StreamEvent:
    """The turn is stored: its row id, and how it ended (`stop_reason` of the last model step)."""
    data = {"log_id": log_id, "session_id": session_id, "skipped_citations": skipped_citations}
    return StreamEvent(EventName.DONE, {**data, "stop_reason": stop_reason})


def error_event(*, kind: str, message: str) -> StreamEvent:
    """The turn failed: `kind` names why, `message` is fit to show a user."""
    return StreamEvent(EventName.ERROR, {"error": {"type": kind, "message": message}})


def rewind_event(*, to: int, answer: str) -> StreamEvent:
    """Drop every event after id `to`; `answer` is the answer as it stood at `to` (docs/live.md#rewind)."""
    return StreamEvent(EventName.REWIND, {"to": to, "answer": answer})


def tool_call_event(*, tool_call_id: str, name: str, tool_input: Mapping[str, Any]) -> StreamEvent:
    """Log-only: the model called tool `name` (its `tool_use` block's `id` and `input`), before it runs."""
    return StreamEvent(LogOnlyEventName.TOOL_CALL, {"id": tool_call_id, "name": name, "input": tool_input})


def tool_result_event(
    *, tool_call_id: str, name: str, sources: Sequence[Mapping[str, Any]], is_error: bool = False
) -> StreamEvent:
    """Log-only: the tool call ended; `sources` are the `{"source", "title", "target"?}` it wrote ([] on an error).

    Each `target` is the one the turn's registry holds for the source once
    the call is recorded: the target a citation made next carries. No raw
    output and no error text: they stay with the model.
    """
    data = {"id": tool_call_id, "name": name, "sources": list(sources), "is_error": is_error}
    return StreamEvent(LogOnlyEventName.TOOL_RESULT, data)
