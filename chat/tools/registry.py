"""The tools a live turn offers the model: only those that are configured (issue 8)."""
from __future__ import annotations

from django.conf import settings
from django.utils.module_loading import import_string

from chat.tools.base import ToolExecutor
from chat.tools.library import library_readers

__all__ = ["configured_tools"]


def configured_tools() -> list[ToolExecutor]:
    """The configured executors, in the order the model sees them.

    The library readers are always on. The other tools plug in here, each a
    factory that returns an executor, or None when not configured (no key, or
    switched off), in which case the model is not offered it:
    `chat.tools.search_web.search_web_tool()`, `chat.tools.python.execute_python_tool()`
    and `finance.sql_tool.execute_sql_tool()` (wired on merge).
    """
    tools: list[ToolExecutor] = [*library_readers()]
    # --- optional tools (wired on merge) -------------------------------------
    # for factory in (execute_sql_tool, search_web_tool, execute_python_tool):
    #     tool = factory()
    #     if tool is not None:
    #         tools.append(tool)
    # Deployment-specific factories (dotted paths, `LIVE_TOOL_FACTORIES`), same contract.
    for path in settings.LIVE_TOOL_FACTORIES:
        tool = import_string(path)()
        if tool is not None:
            tools.append(tool)
    return tools
