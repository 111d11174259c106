"""The protocol every tool executor implements: `ToolExecutor` and `ToolError` (docs/tools.md).

Executors live in the apps, chat's (`tools`) and finance's
(`finance.sql_tool`) alike, so the protocol sits below both. What a tool
is (its name, input schema, output check, block rule and prompt row) is its
`citations.citable.ToolSpec` (docs/tools.md#one-spec-per-tool). Pure: only
the standard library is imported.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["ToolError", "ToolExecutor"]


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
    turn turns its output into blocks with the spec's rule.
    """

    # Read-only: the executors are frozen dataclasses or plain classes.
    @property
    def name(self) -> str: ...

    def definition(self) -> dict[str, Any]: ...

    def run(self, tool_input: dict[str, Any], *, user: Any) -> dict[str, Any]: ...
