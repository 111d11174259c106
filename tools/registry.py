"""The tools a live turn offers the model: only those that are configured (docs/live.md)."""

from __future__ import annotations

from django.conf import settings
from django.utils.module_loading import import_string

from citations.tools import ToolExecutor
from finance.sql_tool import execute_sql_tool
from tools.library import library_readers
from tools.measured import MeasuredTool
from tools.python import execute_python_tool
from tools.search_web import search_web_tool

__all__ = ["configured_tools"]


def configured_tools() -> list[ToolExecutor]:
    """The configured executors, in the order the model sees them.

    The library readers are always on. The other tools plug in here, each a
    factory that returns an executor, or None when not configured (no key, or
    switched off), in which case the model is not offered it:
    `tools.search_web.search_web_tool()`, `tools.python.execute_python_tool()`
    and `finance.sql_tool.execute_sql_tool()`. A factory named in
    `LIVE_TOOL_FACTORIES` is added last and replaces a tool of the same name.
    Each comes wrapped in a `MeasuredTool`, which counts and times its calls.
    """
    tools: dict[str, ToolExecutor] = {tool.name: tool for tool in library_readers()}
    for factory in (execute_sql_tool, search_web_tool, execute_python_tool):
        optional = factory()
        if optional is not None:
            tools[optional.name] = optional
    # Deployment-specific factories (dotted paths, `LIVE_TOOL_FACTORIES`), same
    # contract; one that returns a tool of a name already offered replaces it.
    for path in settings.LIVE_TOOL_FACTORIES:
        extra = import_string(path)()
        if extra is not None:
            tools[extra.name] = extra
    return [MeasuredTool(tool) for tool in tools.values()]
