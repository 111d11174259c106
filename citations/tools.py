"""What a tool is, declared once, and how every executor runs (docs/tools.md#one-spec-per-tool).

`ToolSpec` is all the domain knows of one tool: its name, the input schema
the model is shown, the check of its output in a turn record, the rule that
turns that output into `search_result` blocks, and its row of the v5
prompt's citation table. Each tool's spec sits beside its block rule in
`citations.citable` (`sql`, `python`, `library`, `web`), and
`citations.citable.TOOL_SPECS` lists them once; the prompt's table, the
record's checks, `to_citable_content` and the executors' definitions all
read them from there, and tests hold docs/tools.md and docs/citable.md to
them.

`ToolExecutor` and `ToolError` are the protocol every executor implements,
chat's (`chat.tools`) and finance's (`finance.sql_tool`) alike, so it sits
below both apps. Pure: nothing of ours is imported at run time.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # the rules import this module: a type-only import keeps it a leaf
    from citations.citable.blocks import SearchResult

__all__ = ["ToolError", "ToolExecutor", "ToolSpec"]


class ToolError(Exception):
    """A tool call that failed; `reason` is short and safe to show the model.

    No stack, no SQL of ours, no secret: the turn runner sends `reason` back
    as an `is_error` tool result and the turn goes on (docs/tools.md).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@runtime_checkable
class ToolExecutor(Protocol):
    """One tool the model may call.

    `name` is a `ToolSpec`'s name (or a deployment's own tool, which then
    gives no citable content); `definition()` is the Messages API tool
    definition (`{"name", "description", "input_schema"}`, from
    `ToolSpec.definition`); `run(tool_input, user=...)` executes one call for
    the turn's user and returns the output object docs/citable.md reads for
    that name, or raises `ToolError`. The tool never decides a target: the
    turn turns its output into blocks with `ToolSpec.citable`.
    """

    # Read-only: the executors are frozen dataclasses or plain classes.
    @property
    def name(self) -> str: ...

    def definition(self) -> dict[str, Any]: ...

    def run(self, tool_input: dict[str, Any], *, user: Any) -> dict[str, Any]: ...


#: `(tool_input, output, path)`: raises `citations.json_checks.TurnRecordError` naming `path` (the
#: event's `events[i].output`) and the field when an output field the block rule reads has the wrong type.
OutputCheck = Callable[[Mapping[str, Any], Mapping[str, Any], str], None]
#: `(tool_input, output)` -> the call's `search_result` blocks, in order of first appearance; never raises.
CitableRule = Callable[[Mapping[str, object], Mapping[str, object]], "list[SearchResult]"]


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
