"""A tool executor that counts and times its calls (docs/metrics.md): `configured_tools` wraps every tool in one."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from citations.tools import ToolError, ToolExecutor
from telemetry import genai


@dataclass(frozen=True, slots=True)
class MeasuredTool:
    """`tool`, with each `run` recorded in `silvia_tool_calls_total` and `silvia_tool_call_seconds`
    (outcome `ok`, `tool_error` for a `ToolError`, `error` for anything else raised, which propagates),
    and traced as an `execute_tool {name}` span with the same outcome (docs/metrics.md#traces)."""

    tool: ToolExecutor

    @property
    def name(self) -> str:
        return self.tool.name

    def definition(self) -> dict[str, Any]:
        return self.tool.definition()

    def run(self, tool_input: dict[str, Any], *, user: Any) -> dict[str, Any]:
        from telemetry import metrics  # with the first call, not at start-up (docs/metrics.md)

        started, outcome = time.perf_counter(), "error"
        try:
            with genai.tool_call_span(name=self.name, refused=ToolError):
                output = self.tool.run(tool_input, user=user)
            outcome = "ok"
            return output
        except ToolError:
            outcome = "tool_error"
            raise
        finally:
            metrics.tool_call(tool=self.name, seconds=time.perf_counter() - started, outcome=outcome)
