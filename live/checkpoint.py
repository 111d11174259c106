"""A live turn's checkpoint: its state after the last tool round (docs/registry.md and docs/live.md).

The JSON object stored in `LiveTurn.checkpoint`:
`{"step", "messages", "events", "citationTargets", "eventSeq", "assembler"}`:
the model requests that asked for more (tool rounds and `pause_turn`
continuations), the Messages API messages so far (history included), the
docs/turns.md#the-record events recorded, the registry, the id of the last
event the state includes, and the turn assembler's state at that id (the
answer so far, its inline citations, skipped counts, model;
`TurnAssembler.snapshot`). The texts a citation's support is checked
against are not stored twice: a resumed assembler reads them again from the
`search_result` blocks of the messages' tool results, as the model got them
(docs/support.md).

Reading never fails: a checkpoint without `citationTargets` resumes with an
empty registry (its sources stream untyped), a malformed entry resumes
untyped (`TurnRegistry.from_checkpoint`), an assembler state that cannot be
read is rebuilt from the recorded events, and a checkpoint whose messages or
events cannot be read restarts the turn from its first step.

`resume_rewind` is the rule for the event ids of a resumed turn: ids go on
after the highest id ever sent, and a `rewind` comes first when clients may
hold events the checkpoint does not include.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from chat.models import ChatLog
from citations.assembler import SourceTexts, TurnAssembler, replay
from citations.live_events import StreamEvent, rewind_event
from citations.registry import CHECKPOINT_KEY, TurnRegistry
from citations.turn import TurnRecordError, parse_turn_record
from live.db import one_writer
from live.log import LostTurnError
from live.models import LiveTurn
from telemetry import tracing

__all__ = ["TurnState", "initial_checkpoint", "load_state", "resume_rewind", "save_checkpoint"]


@dataclass
class TurnState:
    """What a worker carries between steps; `to_json()` is the checkpoint."""

    messages: list[dict[str, Any]]
    events: list[dict[str, Any]] = field(default_factory=list)
    assembler: TurnAssembler = field(default_factory=TurnAssembler)
    step: int = 0
    event_seq: int = 1

    @property
    def registry(self) -> TurnRegistry:
        return self.assembler.registry

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "messages": self.messages,
            "events": self.events,
            CHECKPOINT_KEY: self.registry.to_json(),
            "eventSeq": self.event_seq,
            "assembler": self.assembler.snapshot(),
        }


def history_messages(*, session_id: uuid.UUID, before: Any) -> list[dict[str, Any]]:
    """Earlier turns of the session as text only: a user and an assistant message each (docs/live.md)."""
    messages: list[dict[str, Any]] = []
    rows = ChatLog.objects.filter(session_id=session_id, created_at__lt=before).order_by("created_at", "id")
    for user_message, response in rows.values_list("user_message", "response"):
        if user_message.strip() and response.strip():  # the API refuses empty text
            messages += [{"role": "user", "content": user_message}, {"role": "assistant", "content": response}]
    return messages


def initial_checkpoint(turn: LiveTurn) -> dict[str, Any]:
    """The state before the first step: history plus the user's message, nothing streamed but `turn`."""
    messages = history_messages(session_id=turn.session_id, before=turn.created_at)
    messages.append({"role": "user", "content": turn.user_message})
    return TurnState(messages=messages).to_json()


def _readable(checkpoint: object) -> TypeGuard[dict[str, Any]]:
    if not isinstance(checkpoint, dict):
        return False
    messages, events = checkpoint.get("messages"), checkpoint.get("events")
    return (
        isinstance(messages, list)
        and bool(messages)
        and all(isinstance(m, dict) for m in messages)
        and isinstance(events, list)
        and all(isinstance(e, dict) for e in events)
        and isinstance(checkpoint.get("step"), int)
        and isinstance(checkpoint.get("eventSeq"), int)
        and checkpoint["eventSeq"] >= 1
    )


def _assembler(checkpoint: dict[str, Any]) -> TurnAssembler | None:
    """The checkpoint's assembler state, else one rebuilt from its events (a checkpoint of an
    older version); None when neither can be read."""
    registry = TurnRegistry.from_checkpoint(checkpoint)
    # The sources' texts (for support, docs/support.md) are read again from the tool results the model got.
    assembler = TurnAssembler.from_snapshot(checkpoint.get("assembler"), registry, checkpoint["messages"])
    if assembler is not None:
        return assembler
    record = {"session": {"id": str(uuid.UUID(int=0))}, "prompt_version": "v5", "user_message": ""}
    try:
        turn = parse_turn_record({**record, "events": checkpoint["events"]}, user_given=True)
    except TurnRecordError:
        return None
    assembler = replay(turn.events)
    # From here on the turn sees the registry its checkpoint held (docs/registry.md#checkpoints), and the
    # sources' texts as the model got them (a jsonb round trip reorders the recorded rows' keys).
    assembler.registry = registry
    assembler.sources = SourceTexts()
    assembler.sources.add_tool_results(checkpoint["messages"])
    return assembler


def load_state(turn: LiveTurn) -> TurnState:
    """The state to run `turn` from: its checkpoint, or its first step when none can be read."""
    checkpoint = turn.checkpoint
    assembler = _assembler(checkpoint) if _readable(checkpoint) else None
    if not _readable(checkpoint) or assembler is None:
        checkpoint = initial_checkpoint(turn)
        assembler = TurnAssembler()
    return TurnState(
        messages=checkpoint["messages"],
        events=checkpoint["events"],
        assembler=assembler,
        step=checkpoint["step"],
        event_seq=checkpoint["eventSeq"],
    )


def resume_rewind(state: TurnState, last_seq: int) -> StreamEvent | None:
    """The event a run from `state` sends first, when the turn's log already holds `last_seq` events.

    A run's events are numbered after `last_seq`, the highest id ever sent:
    ids are never reused. When the log went past the state's `eventSeq` (a
    worker died after sending more than its checkpoint holds), a client may
    hold output the new run will not repeat, so the run first sends `rewind`
    `{"to": eventSeq, "answer": <the answer at eventSeq>}`: a client drops
    what it received after `to` (docs/live.md#rewind). None otherwise. The
    turn runner calls this whenever it starts, so every resumer applies it.
    """
    if last_seq <= state.event_seq:
        return None
    return rewind_event(to=state.event_seq, answer=state.assembler.answer)


@tracing.traced("save_checkpoint")
def save_checkpoint(turn_id: uuid.UUID, token: uuid.UUID, state: TurnState) -> None:
    """Store the state after a tool round; `LostTurnError` when this worker no longer owns the turn."""
    with one_writer():
        updated = LiveTurn.objects.running_for_worker(turn_id, token).update(checkpoint=state.to_json())
    if not updated:
        raise LostTurnError(str(turn_id))
