"""The support turn cases (`tests/vectors/support_turns.json`, SPEC 15, docs/support.md) as each path takes them:
a record (record_turn, import_turns), a scripted live turn (its model steps for the recorded model, and tools that
answer with the record's outputs) and the expected row."""

from __future__ import annotations

import json
from typing import Any

from citations.tools import ToolError
from tests.cases import load_cases

CASES = load_cases("support_turns.json")


def tool_calls(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [event for event in record["events"] if event["type"] == "tool_call"]


def live_steps(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The recorded model's steps for a live turn of `record`: one step calling its tools (no text, so the
    answer is the same), then each assistant message of the record."""
    steps = []
    calls = tool_calls(record)
    if calls:
        uses = [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["input"]} for c in calls]
        steps.append({"message": {"content": uses, "stop_reason": "tool_use"}})
    for event in record["events"]:
        if event["type"] == "assistant":
            message = event["message"]
            steps.append({"message": {"content": message["content"], "stop_reason": message["stop_reason"]}})
    return steps


class RecordedOutputs:
    """A tool executor answering each call with the output the support cases recorded for that input."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._outputs = {
            json.dumps(call["input"], sort_keys=True): call["output"]
            for case in CASES
            for call in tool_calls(case["record"])
            if call["name"] == name
        }

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "description": "Recorded.", "input_schema": {"type": "object"}}

    def run(self, tool_input: dict[str, Any], *, user: Any) -> dict[str, Any]:
        output = self._outputs.get(json.dumps(tool_input, sort_keys=True))
        if output is None:
            raise ToolError(f"no recorded output for {self.name}")
        return output


def recorded_sql() -> RecordedOutputs:
    return RecordedOutputs("execute_sql")


def recorded_python() -> RecordedOutputs:
    return RecordedOutputs("execute_python")


def recorded_card_reader() -> RecordedOutputs:
    return RecordedOutputs("read_credit_card_document")


#: `LIVE_TOOL_FACTORIES` for a live turn of a support case.
TOOL_FACTORIES = [f"tests.support_turns.{name}" for name in ("recorded_sql", "recorded_python", "recorded_card_reader")]
