"""The turn loop of a live turn (SPEC sections 5, 6, 7 and 11).

`run_turn(turn_id, token)` runs one claimed turn to its end from its last
checkpoint: model steps streamed through the official `anthropic` SDK, each
`tool_use` executed by its `ToolExecutor`, its output turned into
`search_result` blocks (`to_citable_content`) and written to the turn's
`TurnRegistry` before the next step, a checkpoint after each tool round.
Every event goes to the durable log (`chat.live.events.append_event`) before
any client sees it. A finished turn is a SPEC 7 turn record saved with
`chat.services.save_turn`; a failed one ends with an `error` event, keeps
its checkpoint and writes nothing to `ai_chat_logs`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import uuid
from typing import Any

import anthropic
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import close_old_connections, connection
from django.utils import timezone

from chat.live.checkpoint import TurnState, load_state, save_checkpoint
from chat.live.errors import TurnFailure, failure_from_exception
from chat.live.events import EventWriter, LostTurnError, sqlite_write_lock
from chat.live.model_step import StepStreamer
from chat.live.prompts import system_prompt
from chat.models import LiveTurn
from chat.services import save_turn
from chat.tools.base import ToolError, ToolExecutor
from chat.tools.registry import configured_tools
from citations.citable import to_citable_content
from citations.registry import TurnRegistry
from citations.turn import TurnRecordError

__all__ = ["model_client", "run_turn"]

logger = logging.getLogger(__name__)

# One tool thread per worker thread at most: a turn waits for its tool (the
# thread is there for LIVE_TOOL_TIMEOUT_SECONDS), so the process's database
# connections stay within one per turn (docs/deploying.md#database-connections).
_tool_pool = concurrent.futures.ThreadPoolExecutor(
    max_workers=settings.CELERY_WORKER_CONCURRENCY, thread_name_prefix="live-tool"
)


_clients: dict[tuple[Any, ...], anthropic.Anthropic] = {}
_clients_lock = threading.Lock()


def model_client() -> anthropic.Anthropic:
    """The SDK client, configured from settings (key, base URL, timeout, retry budget).

    One per configuration and process, shared by the turn threads (the SDK
    client is thread-safe): a new one per step would pay for a TLS context
    and a connection pool each time.
    """
    key = (
        settings.ANTHROPIC_API_KEY,
        settings.ANTHROPIC_BASE_URL,
        settings.ANTHROPIC_TIMEOUT_SECONDS,
        settings.ANTHROPIC_MAX_RETRIES,
    )
    with _clients_lock:
        if key not in _clients:
            _clients[key] = anthropic.Anthropic(
                api_key=settings.ANTHROPIC_API_KEY or "no-key-configured",
                base_url=settings.ANTHROPIC_BASE_URL,
                timeout=settings.ANTHROPIC_TIMEOUT_SECONDS,
                max_retries=settings.ANTHROPIC_MAX_RETRIES,
            )
        return _clients[key]


class TurnRunner:
    """One worker's run of one turn (it holds the turn's `worker_token`)."""

    def __init__(self, turn: LiveTurn, token: uuid.UUID) -> None:
        self.turn = turn
        self.token = token
        self.tools: dict[str, ToolExecutor] = {tool.name: tool for tool in configured_tools()}
        self.user = get_user_model().objects.get(pk=turn.user_id)
        self.state: TurnState = load_state(turn)

    def emit(self, event: str, data: Any, finish: dict[str, Any] | None = None) -> None:
        self.writer.put(event, data, finish)
        self.state.event_seq += 1
        if finish:
            self.writer.flush()

    def run(self) -> None:
        self.writer = EventWriter(self.turn.id, self.token, after=self.state.event_seq)
        try:
            self._run()
        finally:
            self.writer.close()

    def _run(self) -> None:
        try:
            while True:
                message = self.model_step()
                self.state.events.append({"type": "assistant", "message": message})
                if message.get("stop_reason") != "tool_use":
                    break
                if self.state.step >= settings.LIVE_TURN_MAX_STEPS:
                    raise TurnFailure("max_steps", "The assistant needed too many steps for this question.")
                self.tool_round(message)
            self.finish(message)
        except LostTurnError:
            logger.info("turn %s: claimed by another worker; this one stops", self.turn.id)
        except TurnFailure as known:
            self.fail(known)
        except Exception as error:  # the model API, the network, or our own bug: never a half-written turn
            classified = failure_from_exception(error)
            if classified.kind == "internal_error":
                logger.exception("turn %s failed", self.turn.id)
            else:
                logger.warning("turn %s: model request failed (%s)", self.turn.id, classified.kind)
            self.fail(classified)

    def model_step(self) -> dict[str, Any]:
        # The connection goes back to the pool while the model thinks; the
        # step's first event takes one again (one per running turn at most).
        connection.close()
        streamer = StepStreamer(self.state.position, self.state.registry, self.emit)
        request: dict[str, Any] = {
            "model": settings.ANTHROPIC_MODEL,
            "max_tokens": settings.ANTHROPIC_MAX_TOKENS,
            "system": system_prompt(self.turn.prompt_version),
            "messages": self.state.messages,
        }
        if self.tools:
            request["tools"] = [tool.definition() for tool in self.tools.values()]
        with model_client().messages.stream(**request) as stream:
            for event in stream:
                streamer.feed(event)
            final = stream.get_final_message()
        streamer.finish()
        return final.to_dict(mode="json")

    def tool_round(self, message: dict[str, Any]) -> None:
        results = []
        for block in message.get("content", []):
            if block.get("type") != "tool_use":
                continue
            results.append(self.run_tool(block))
        self.state.messages.append({"role": "assistant", "content": message["content"]})
        self.state.messages.append({"role": "user", "content": results})
        self.state.step += 1
        self.writer.flush()  # the checkpoint's eventSeq must be in the log
        save_checkpoint(self.turn.id, self.token, self.state)

    def run_tool(self, block: dict[str, Any]) -> dict[str, Any]:
        """Execute one `tool_use`; its tool_result (search_result blocks, or `is_error` with a short reason)."""
        name, tool_input = block.get("name"), block.get("input")
        tool = self.tools.get(name) if isinstance(name, str) else None
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.get("id")}
        if tool is None or not isinstance(name, str) or not isinstance(tool_input, dict):
            return {**result, "is_error": True, "content": f"Unknown tool or bad input: {name!r}"}
        connection.close()  # the tool's thread takes its own: one connection per turn at a time
        future = _tool_pool.submit(_run_tool_in_thread, tool, tool_input, self.user)
        try:
            output = future.result(timeout=settings.LIVE_TOOL_TIMEOUT_SECONDS)
        except concurrent.futures.TimeoutError:
            return {**result, "is_error": True, "content": f"{name} timed out"}
        except ToolError as error:
            return {**result, "is_error": True, "content": error.reason or f"{name} failed"}
        except Exception as error:
            # The class only: an exception's text and traceback can quote row values.
            logger.warning("turn %s: tool %s raised %s", self.turn.id, name, type(error).__name__)
            return {**result, "is_error": True, "content": f"{name} failed"}
        blocks = to_citable_content(name, tool_input, output)
        for search_result in blocks:
            self.state.registry.record(search_result.source, search_result.target)
        self.state.events.append(
            {"type": "tool_call", "id": block["id"], "name": name, "input": tool_input, "output": output}
        )
        content = [search_result.to_block() for search_result in blocks] or [{"type": "text", "text": "No results."}]
        return {**result, "content": content}

    def finish(self, message: dict[str, Any]) -> None:
        record = {
            "id": str(self.turn.id),
            "session": {"id": str(self.turn.session_id), "title": self.turn.user_message[:80]},
            "prompt_version": self.turn.prompt_version,
            "created_at": self.turn.created_at.isoformat(),
            "user_message": self.turn.user_message,
            "events": self.state.events,
        }
        restores = {index: TurnRegistry.from_json(targets) for index, targets in self.state.restores}
        try:
            with sqlite_write_lock():
                saved = save_turn(record, user=self.user, registry_restores=restores)
        except TurnRecordError as error:
            logger.warning("turn %s: the finished turn was refused at %s", self.turn.id, error.path)
            raise TurnFailure("internal_error", "This answer could not be saved. Please try again.") from None
        log = saved.log
        if log.inline_citations != self.state.position.inline:
            # Cannot happen while model_step and assemble_turn agree; tests hold them together.
            logger.error("turn %s: streamed citations differ from the stored ones", self.turn.id)
        self.emit("citations_summary", {"citations": log.citations})
        self.emit("message", message)
        skipped = saved.skipped_citations if saved.created else self.state.position.skipped
        done = {"log_id": str(log.id), "session_id": str(log.session_id), "skipped_citations": skipped}
        # The checkpoint goes once the turn is stored (issue 10).
        self.emit("done", done, finish={"status": "done", "checkpoint": None, "finished_at": timezone.now()})

    def fail(self, failure: TurnFailure) -> None:
        data = {"error": {"type": failure.kind, "message": failure.message}}
        # The checkpoint stays, for inspection in the admin.
        try:
            self.emit("error", data, finish={"status": "failed", "error": data["error"], "finished_at": timezone.now()})
        except LostTurnError:
            return


def _run_tool_in_thread(tool: ToolExecutor, tool_input: dict[str, Any], user: Any) -> dict[str, Any]:
    try:
        return tool.run(tool_input, user=user)
    finally:
        close_old_connections()


def run_turn(turn_id: uuid.UUID, token: uuid.UUID) -> None:
    """Run a claimed turn to its end (stored, failed, or taken over by another worker). Never raises."""
    try:
        turn = LiveTurn.objects.get(pk=turn_id)
        TurnRunner(turn, token).run()
    except Exception:
        logger.exception("turn %s: the worker stopped", turn_id)
    finally:
        close_old_connections()
