"""Running a turn's tool calls (docs/tools.md): each in a thread of its own, within `LIVE_TOOL_TIMEOUT_SECONDS`,
its output recorded by the turn's assembler (what the model's citations then get as targets)."""

from __future__ import annotations

import concurrent.futures
import logging
import uuid
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection

from citations.text import storable_json
from citations.tools import ToolError, ToolExecutor
from live.checkpoint import TurnState
from live.errors import where_raised
from live.log import LostTurnError
from live.stops import result_unless_stopped
from telemetry import metrics, tracing

__all__ = ["tool_result"]

logger = logging.getLogger(__name__)

# One tool thread per worker thread at most: a turn waits for its tool (the
# thread is there for LIVE_TOOL_TIMEOUT_SECONDS), so the process's database
# connections stay within one per turn (docs/deploying.md#database-connections).
_tool_pool = concurrent.futures.ThreadPoolExecutor(
    max_workers=settings.CELERY_WORKER_CONCURRENCY, thread_name_prefix="live-tool"
)


def tool_result(
    tools: dict[str, ToolExecutor],
    block: dict[str, Any],
    problem: str | None,
    *,
    user: Any,
    state: TurnState,
    turn_id: uuid.UUID,
) -> tuple[dict[str, Any], list[Any]]:
    """Run one `tool_use` block: its `tool_result` (search_result blocks, or `is_error` with a short reason
    for the model) and the sources it wrote (its log-only `tool_result` event's; none on an error). The
    output is recorded in `state` (the assembler's registry and the turn's events)."""
    name, tool_input = block.get("name"), block.get("input")
    tool = tools.get(name) if isinstance(name, str) else None
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.get("id")}
    if problem is not None:
        logger.info("turn %s: tool %s not run: its input is unusable", turn_id, name)
        return {**result, "is_error": True, "content": problem}, []
    if tool is None or not isinstance(name, str) or not isinstance(tool_input, dict):
        return {**result, "is_error": True, "content": f"Unknown tool or bad input: {name!r}"}, []
    connection.close()  # the tool's thread takes its own: one connection per turn at a time
    # `carried`: the tool's span (tools.measured) goes under this turn's, from the pool's thread.
    future = _tool_pool.submit(tracing.carried(_run_tool_in_thread), tool, tool_input, user)
    try:
        output = result_unless_stopped(future, turn_id=turn_id, timeout=settings.LIVE_TOOL_TIMEOUT_SECONDS)
    except concurrent.futures.TimeoutError:
        metrics.tool_timed_out(tool=name)
        tracing.add_event("tool_timed_out", {"gen_ai.tool.name": name})
        return {**result, "is_error": True, "content": f"{name} timed out"}, []
    except ToolError as error:
        return {**result, "is_error": True, "content": error.reason or f"{name} failed"}, []
    except LostTurnError:  # stopped while its tool ran: the worker lets go (live.stops)
        raise
    except Exception as error:
        # The class and where only: an exception's text can quote row values.
        logger.warning("turn %s: tool %s raised %s", turn_id, name, where_raised(error))
        return {**result, "is_error": True, "content": f"{name} failed"}, []
    output, replaced = storable_json(output)  # a NUL in a row cannot be checkpointed or stored
    if replaced:
        logger.warning("turn %s: tool %s output: %d character(s) replaced with U+FFFD", turn_id, name, replaced)
    blocks = state.assembler.tool_call(name, tool_input, output)
    state.events.append({"type": "tool_call", "id": block["id"], "name": name, "input": tool_input, "output": output})
    content = [search_result.to_block() for search_result in blocks] or [{"type": "text", "text": "No results."}]
    return {**result, "content": content}, state.assembler.tool_sources(blocks)


def _run_tool_in_thread(tool: ToolExecutor, tool_input: dict[str, Any], user: Any) -> dict[str, Any]:
    try:
        return tool.run(tool_input, user=user)
    finally:
        close_old_connections()
