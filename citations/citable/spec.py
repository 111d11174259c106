"""`ToolSpec`: one tool, declared once (docs/tools.md#one-spec-per-tool).

A spec is all the domain knows of one tool: its name, the input schema the
model is shown, the check of its output in a turn record, the rule that
turns that output into `search_result` blocks, and its row of the v5
prompt's citation table. Each tool's spec sits beside its block rule
(`sql`, `python`, `library`, `web`), and `citations.citable.TOOL_SPECS`
lists them once; the prompt's table, the record's checks,
`to_citable_content` and the executors' definitions all read them from
there, and tests hold docs/tools.md and docs/citable.md to them. The
executors themselves implement `citations.tools.ToolExecutor`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from citations.citable.blocks import SearchResult

__all__ = ["CitableRule", "OutputCheck", "ToolSpec"]

#: `(tool_input, output, path)`: raises `citations.json_checks.TurnRecordError` naming `path` (the
#: event's `events[i].output`) and the field when an output field the block rule reads has the wrong type.
OutputCheck = Callable[[Mapping[str, Any], Mapping[str, Any], str], None]
#: `(tool_input, output)` -> the call's `search_result` blocks, in order of first appearance; never raises.
CitableRule = Callable[[Mapping[str, object], Mapping[str, object]], list[SearchResult]]


@dataclass(frozen=True, slots=True, eq=False)
class ToolSpec:
    """One tool, declared once (docs/tools.md#one-spec-per-tool).

    - `name`: the Anthropic tool name.
    - `input_schema`: the JSON Schema of `tool_use.input` the model is shown
      (an object schema; `definition` hands out a copy).
    - `check_output`: the record's check of the output fields `citable`
      reads (docs/turns.md#the-record).
    - `citable`: tool input and output -> `search_result` blocks with targets
      (docs/citable.md), for JSON objects.
    - `prompt_sources`: what the v5 system prompt's citation table says the
      tool's sources are (the row's second cell, in the model's words).
    """

    name: str
    input_schema: Mapping[str, Any]
    check_output: OutputCheck
    citable: CitableRule
    prompt_sources: str

    def definition(self, description: str) -> dict[str, Any]:
        """The Messages API tool definition `{"name", "description", "input_schema"}`.

        `description` is the executor's: it may name its configured limits.
        """
        return {"name": self.name, "description": description, "input_schema": copy.deepcopy(dict(self.input_schema))}
