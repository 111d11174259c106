"""The one interface every tool executor implements.

A tool takes the model's `tool_use.input` and returns the raw output whose
shape docs/citable.md fixes for that tool name (`{"rows": [...]}` for
`execute_sql`, `{"stdout", "stderr"}` for `execute_python`, ...). The turn
runner, not the tool, turns that output into `search_result` blocks, so a
tool never decides a target.

A tool that cannot answer raises `ToolError` with a short reason fit to show
the model (no stack, no SQL of ours, no secret); the runner sends it back as
an `is_error` tool result and the turn goes on.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


class ToolError(Exception):
    """A tool call that failed; `reason` is short and safe to show the model."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@runtime_checkable
class ToolExecutor(Protocol):
    """One tool the model may call.

    `name` is the Anthropic tool name (one of docs/citable.md's names); `definition()`
    is the Messages API tool definition (`{"name", "description",
    "input_schema"}`); `run(tool_input, user=...)` executes one call for the
    turn's user and returns the docs/citable.md output object, or raises `ToolError`.
    """

    # Read-only: the executors are frozen dataclasses or plain classes.
    @property
    def name(self) -> str: ...

    def definition(self) -> dict[str, Any]: ...

    def run(self, tool_input: dict[str, Any], *, user: Any) -> dict[str, Any]: ...
