"""The turn loop of a live turn (SPEC sections 5, 6, 7 and 11; docs/live.md).

`run_turn(turn_id, token)` runs one claimed turn to its end from its last
checkpoint: model steps streamed through the official `anthropic` SDK into
the turn's `citations.assembler.TurnAssembler` (`live.model_step`), each
`tool_use` executed by its `ToolExecutor` and its output written to the
turn's registry by the assembler before the next step, a checkpoint after
each tool round or `pause_turn` continuation. Every event goes to the
durable log (`live.log`) before any client sees it. A finished turn
is saved with `chat.services.save_assembled_turn`, the assembler's result
as it streamed, so the row is what streamed; the row and the final
events commit together. A failed one ends with an `error` event (or, when
that cannot be written, with its status alone), keeps its checkpoint and
writes nothing to `ai_chat_logs`.

A step's stream that ends before `message_stop` (cut, empty, not an event
stream) is asked again after a `rewind` of what it streamed, up to
`LIVE_TURN_CUT_STREAM_RETRIES` times, then fails the turn (`model_stream_cut`):
half an answer is never stored as one (SPEC 11). The answer's cap
(`TURN_MAX_TEXT_CHARS`) is enforced as it streams (`answer_too_long`).

Stop reasons (docs/live.md#stop-reasons): `tool_use` runs the tools and asks
again; `pause_turn` sends the assistant content back and asks again; a
`tool_use` cut off at `max_tokens` is asked again once with twice the
tokens (after a `rewind` of what that step streamed), then fails the turn;
any other (`end_turn`, `max_tokens` in text, `stop_sequence`, `refusal`, ...)
ends the turn, and `done` carries it.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import close_old_connections, connection
from django.utils import timezone
from django.utils.functional import SimpleLazyObject

from chat.services import save_assembled_turn
from citations.assembler import TurnAssembler
from citations.live_events import (
    EventName,
    StreamEvent,
    citations_summary_event,
    done_event,
    message_event,
    rewind_event,
    tool_call_event,
    tool_result_event,
)
from citations.tools import ToolExecutor
from citations.turn import TurnRecordError
from live.checkpoint import TurnState, load_state, resume_rewind, save_checkpoint
from live.db import write_transaction
from live.errors import ModelStreamCutError, TurnFailure, failure_from_exception, where_raised
from live.log import LostTurnError, append_events, encode, turn_fail
from live.model_client import model_client, model_request_timed
from live.model_step import PAUSE_TURN, TOOL_USE, StepStream, tool_use_cut_off
from live.models import LiveTurn, LiveTurnStatus
from live.prompts import system_prompt
from live.stops import closing_on_stop, turn_lost, watching
from live.tool_calls import tool_result
from live.writer import EventWriter
from telemetry import metrics, tracing  # this module loads with the first turn only (tests/silvia/test_startup.py)
from tools.registry import configured_tools

__all__ = ["run_turn"]

logger = logging.getLogger(__name__)


class TurnRunner:
    """One worker's run of one turn (it holds the turn's `worker_token`)."""

    def __init__(self, turn: LiveTurn, token: uuid.UUID) -> None:
        self.turn = turn
        self.token = token
        self.tools: dict[str, ToolExecutor] = {tool.name: tool for tool in configured_tools()}
        # Read when a tool first asks for it (a turn that calls none, or only tools that need no user, reads
        # no user row).
        self.user = SimpleLazyObject(lambda: get_user_model().objects.get(pk=turn.user_id))
        self.state: TurnState = load_state(turn)
        # A turn's first text is counted once: not again by a resumed turn that had sent text.
        self.text_sent = bool(turn.resume_count) and turn.events.filter(event=EventName.TEXT).exists()

    def seconds(self) -> float:
        """Seconds since the turn's start (its POST): what a user waited, time queued included."""
        return (timezone.now() - self.turn.created_at).total_seconds()

    def emit(self, event: StreamEvent) -> None:
        """Hand one event to the log's writer, which batches them (`EventWriter`); its id comes when written."""
        self.writer.put(event)
        if event.name == EventName.TEXT and not self.text_sent:
            self.text_sent = True
            metrics.first_text(seconds=self.seconds())

    def flush(self) -> None:
        """Write the events the writer holds: `state.event_seq` is then the id of the log's last event."""
        self.writer.flush()
        self.state.event_seq = self.writer.written

    def run(self) -> None:
        # Ids go on after the highest id ever sent (docs/live.md#rewind).
        rewind = resume_rewind(self.state, self.turn.last_seq)
        self.state.event_seq = self.turn.last_seq
        self.writer = EventWriter(self.turn.id, self.token, after=self.turn.last_seq)
        try:
            if rewind is not None:
                logger.info(
                    "turn %s: resumed past its checkpoint; rewinding to event %s", self.turn.id, rewind.data["to"]
                )
                self.emit(rewind)
            self._run()
        finally:
            self.writer.close()

    def _run(self) -> None:
        try:
            while True:
                message, problems = self.model_step()
                self.state.events.append({"type": "assistant", "message": message})
                if message.get("stop_reason") not in (TOOL_USE, PAUSE_TURN):
                    break
                if self.state.step >= settings.LIVE_TURN_MAX_STEPS:
                    raise TurnFailure("max_steps")
                self.next_round(message, problems)
            self.finish(message)
        except LostTurnError:
            logger.info("turn %s: claimed by another worker; this one stops", self.turn.id)
            turn_lost(self.turn.id)
        except TurnFailure as known:
            self.fail(known)
        except Exception as error:  # the model API, the network, or our own bug: never a half-written turn
            classified = failure_from_exception(error)
            # The class and where, never the text: the SDK's and our errors can quote tool input.
            if classified.kind == "internal_error":
                logger.error("turn %s failed: %s", self.turn.id, where_raised(error))
            else:
                logger.warning(
                    "turn %s: model request failed (%s, %s)", self.turn.id, classified.kind, type(error).__name__
                )
            self.fail(classified)

    def model_step(self) -> tuple[dict[str, Any], dict[str, str]]:
        """One model step streamed into the assembler: its final message and its unusable tool inputs.

        A stream that ends before `message_stop` (SPEC 11: cut, empty, not an event stream) is asked again up
        to `LIVE_TURN_CUT_STREAM_RETRIES` times, then fails the turn (`model_stream_cut`); a `tool_use` cut
        off at `max_tokens` is asked again once with twice the tokens. What a step asked again had streamed
        is rewound first.
        """
        self.flush()  # the id a rewind of this step goes back to
        before, seq_before = self.state.assembler.copy(), self.state.event_seq
        max_tokens, cuts, widened = settings.ANTHROPIC_MAX_TOKENS, 0, False
        while True:
            try:
                step = self.stream_step(max_tokens)
            except ModelStreamCutError:
                cuts += 1
                if cuts > settings.LIVE_TURN_CUT_STREAM_RETRIES:
                    self.rewind_to(before, seq_before)  # the client drops the cut text before it reads the error
                    raise
                logger.warning(
                    "turn %s: the model's stream ended before message_stop; asking again (%d of %d)",
                    self.turn.id,
                    cuts,
                    settings.LIVE_TURN_CUT_STREAM_RETRIES,
                )
            else:
                if not tool_use_cut_off(step.message):
                    break
                if widened:
                    raise TurnFailure("max_tokens")
                logger.info(
                    "turn %s: a tool call was cut off at max_tokens; asking again with %d",
                    self.turn.id,
                    2 * max_tokens,
                )
                max_tokens, widened = 2 * max_tokens, True
            seq_before = self.rewind_to(before, seq_before)
        if self.state.assembler.replaced:
            logger.warning(
                "turn %s: %d NUL or lone surrogate character(s) of the model's text replaced with U+FFFD",
                self.turn.id,
                self.state.assembler.replaced,
            )
        if step.skipped_fields:
            # Our names of the places (`text_delta.text`, ...), never a value the model wrote.
            logger.warning(
                "turn %s: model stream fields skipped for their shape: %s",
                self.turn.id,
                ", ".join(f"{place} x{count}" for place, count in sorted(step.skipped_fields.items())),
            )
        return step.message, step.tool_input_problems

    def rewind_to(self, before: TurnAssembler, seq_before: int) -> int:
        """The assembler back to `before`, and a `rewind` to event `seq_before` when events were sent since; the
        id a later rewind goes back to (this one's, whose answer is `before`'s)."""
        self.state.assembler = before.copy()
        self.flush()
        if self.state.event_seq > seq_before:
            self.emit(rewind_event(to=seq_before, answer=before.answer))
            self.flush()
            return self.state.event_seq
        return seq_before

    def stream_step(self, max_tokens: int) -> StepStream:
        """One request to the model, its stream fed to the assembler as it comes. Raises `ModelStreamCutError`
        when the stream ends before `message_stop` (`StepStream.complete`), and `TurnFailure`
        (`answer_too_long`) as soon as the answer passes `TURN_MAX_TEXT_CHARS`."""
        # The connection goes back to the pool while the model thinks; each
        # event's write borrows one (docs/deploying.md#database-connections).
        connection.close()
        step = StepStream(self.state.assembler)
        request: dict[str, Any] = {
            "model": settings.ANTHROPIC_MODEL,
            "max_tokens": max_tokens,
            "system": system_prompt(self.turn.prompt_version),
            "messages": self.state.messages,
        }
        if self.tools:
            request["tools"] = [tool.definition() for tool in self.tools.values()]
        answer_chars = len(self.state.assembler.answer)
        with (
            model_request_timed(request, step),
            # The raw response, read by `StepStream.read` (why: live/model_step.py).
            model_client() as client,
            client.messages.with_streaming_response.create(**request, stream=True) as response,
            closing_on_stop(self.turn.id, response.http_response),  # a stop ends a read that waits (live.stops)
        ):
            try:
                for event in step.read(response.iter_bytes()):
                    if event.name == EventName.TEXT:
                        # The cap as the answer streams, not at the save: a 20 MB answer never reaches a client.
                        answer_chars += len(event.data["text"])
                        if answer_chars > settings.TURN_MAX_TEXT_CHARS:
                            raise TurnFailure("answer_too_long")
                    self.emit(event)
            except (LostTurnError, TurnFailure):
                raise
            except Exception as error:
                # The connection dropped mid-stream (the SDK's retries cover only a request's start): a cut
                # stream like one that ends quietly. A stop shuts the socket too: `closing_on_stop` makes that
                # a `LostTurnError`, whatever is raised here.
                if failure_from_exception(error).kind != "connection_error":
                    raise
                raise ModelStreamCutError() from None
            if not step.complete:
                raise ModelStreamCutError()
        for event in step.finish():
            self.emit(event)
        return step

    def next_round(self, message: dict[str, Any], problems: dict[str, str]) -> None:
        """After `tool_use`, the tools' results; after `pause_turn`, the content alone (the model goes on)."""
        self.state.messages.append({"role": "assistant", "content": message["content"]})
        if message.get("stop_reason") == TOOL_USE:
            calls = [block for block in message.get("content", []) if block.get("type") == TOOL_USE]
            # Log-only events (docs/live.md#log-only-events): every call of the step, then their results.
            for block in calls:
                tool_input = block.get("input")
                self.emit(
                    tool_call_event(
                        tool_call_id=str(block.get("id")),
                        name=str(block.get("name")),
                        tool_input=tool_input if isinstance(tool_input, dict) else {},
                    )
                )
            results = [self.run_tool(block, problems.get(str(block.get("id")))) for block in calls]
            self.state.messages.append({"role": "user", "content": results})
        self.state.step += 1
        self.flush()  # the checkpoint's eventSeq must be in the log
        save_checkpoint(self.turn.id, self.token, self.state)

    def run_tool(self, block: dict[str, Any], problem: str | None = None) -> dict[str, Any]:
        """Execute one `tool_use`; its tool_result (search_result blocks, or `is_error` with a short reason).
        Its log-only `tool_result` event names the sources it wrote (docs/live.md#log-only-events)."""
        result, sources = tool_result(
            self.tools, block, problem, user=self.user, state=self.state, turn_id=self.turn.id
        )
        event = tool_result_event(
            tool_call_id=str(block.get("id")),
            name=str(block.get("name")),
            sources=sources,
            is_error=bool(result.get("is_error")),
        )
        self.emit(event)
        return result

    def finish(self, message: dict[str, Any]) -> None:
        """Store the turn (the assembler's result: what streamed) and send the final events, in one transaction."""
        assembled = self.state.assembler.result()
        stop_reason = str(message.get("stop_reason"))
        self.flush()  # every event before these is in the log
        try:
            with tracing.span("save_turn"), write_transaction():
                saved = save_assembled_turn(
                    turn_id=self.turn.id,
                    session_id=self.turn.session_id,
                    session_title=self.turn.user_message[:80],
                    user_id=self.turn.user_id,
                    prompt_version=self.turn.prompt_version,
                    created_at=self.turn.created_at,
                    user_message=self.turn.user_message,
                    assembled=assembled,
                )
                log = saved.log
                skipped = saved.skipped_citations if saved.created else assembled.skipped_citations
                final = [
                    citations_summary_event(log.citations),
                    message_event(message),
                    done_event(
                        log_id=str(log.id),
                        session_id=str(log.session_id),
                        skipped_citations=skipped,
                        stop_reason=stop_reason,
                    ),
                ]
                append_events(
                    self.turn.id,
                    self.token,
                    [(event.name, encode(event)) for event in final],
                    after=self.state.event_seq,
                    # The checkpoint goes once the turn is stored (issue 10).
                    finish={
                        "status": LiveTurnStatus.DONE,
                        "checkpoint": None,
                        "finished_at": timezone.now(),
                        "stop_reason": stop_reason,
                    },
                )
        except TurnRecordError as error:
            logger.warning("turn %s: the finished turn was refused at %s", self.turn.id, error.path)
            raise TurnFailure("internal_error", "This answer could not be saved. Please try again.") from None
        self.state.event_seq += len(final)
        metrics.turn_finished(outcome="done", seconds=self.seconds())
        for kind, count in assembled.skipped_citations.items():
            logger.info("turn %s: skipped %d citation(s) of type %s", self.turn.id, count, kind)

    def fail(self, failure: TurnFailure) -> None:
        """End the turn `failed` with an `error` event, or with the status alone when no event can be written."""
        try:
            self.writer.flush()
        except LostTurnError:
            turn_lost(self.turn.id)
            return
        except Exception as error:
            logger.warning("turn %s: its events could not be written (%s)", self.turn.id, type(error).__name__)
        tracing.turn_failed(failure.kind)
        # The checkpoint stays, for inspection in the admin.
        if turn_fail(self.turn.id, kind=failure.kind, message=failure.message, token=self.token):
            metrics.turn_finished(outcome="failed", error_type=failure.kind, seconds=self.seconds())


def run_turn(turn_id: uuid.UUID, token: uuid.UUID, *, turn: LiveTurn | None = None) -> None:
    """Run a claimed turn to its end (stored, failed, or taken over by another worker). Never raises.
    `turn`: its row as claimed (`live.engine.turn_take`), else read here."""
    try:
        if turn is None:
            turn = LiveTurn.objects.get(pk=turn_id)
        with watching(turn_id, token):  # a stop lets the worker go at once (live.stops)
            TurnRunner(turn, token).run()
    except Exception as error:
        logger.error("turn %s: the worker stopped: %s", turn_id, where_raised(error))
        try:  # never a turn left running by a crash of its runner
            failure = TurnFailure("internal_error")
            tracing.turn_failed(failure.kind)
            if turn_fail(turn_id, kind=failure.kind, message=failure.message, token=token) and turn is not None:
                seconds = (timezone.now() - turn.created_at).total_seconds()
                metrics.turn_finished(outcome="failed", error_type=failure.kind, seconds=seconds)
        except Exception as again:
            logger.error("turn %s: could not be marked failed (%s)", turn_id, type(again).__name__)
    finally:
        close_old_connections()
