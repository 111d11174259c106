"""A live turn's checkpoint: its state after the last tool round (docs/registry.md and docs/live.md).

The JSON object stored in `LiveTurn.checkpoint`:
`{"step", "messages", "events", "citationTargets", "eventSeq", "answer": {"offset", "hasText", "inline", "skipped"},
"restores"}`: the model steps done, the Messages API messages so far
(history included), the docs/turns.md#the-record events recorded, the registry, the id of
the last event sent, where the answer stands (UTF-16 units) and the
citations streamed, and the registry restores of earlier resumes.

Reading never fails: a checkpoint without `citationTargets` resumes with an
empty registry (its sources stream untyped), a malformed entry resumes
untyped (`TurnRegistry.from_checkpoint`), and a checkpoint whose messages or
events cannot be read restarts the turn from its first step.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from chat.live.events import LostTurnError, sqlite_write_lock
from chat.live.model_step import AnswerPosition
from chat.models import ChatLog, LiveTurn
from citations.registry import CHECKPOINT_KEY, TurnRegistry

__all__ = ["TurnState", "initial_checkpoint", "load_state", "save_checkpoint"]


@dataclass
class TurnState:
    """What a worker carries between steps; `to_json()` is the checkpoint."""

    messages: list[dict[str, Any]]
    events: list[dict[str, Any]] = field(default_factory=list)
    registry: TurnRegistry = field(default_factory=TurnRegistry)
    step: int = 0
    event_seq: int = 1
    position: AnswerPosition = field(default_factory=AnswerPosition)
    restores: list[tuple[int, dict[str, Any]]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "messages": self.messages,
            "events": self.events,
            CHECKPOINT_KEY: self.registry.to_json(),
            "eventSeq": self.event_seq,
            "answer": {
                "offset": self.position.offset,
                "hasText": self.position.has_text,
                "inline": self.position.inline,
                "skipped": self.position.skipped,
            },
            "restores": [[index, targets] for index, targets in self.restores],
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
    messages, events, answer = checkpoint.get("messages"), checkpoint.get("events"), checkpoint.get("answer")
    return (
        isinstance(messages, list)
        and bool(messages)
        and all(isinstance(m, dict) for m in messages)
        and isinstance(events, list)
        and all(isinstance(e, dict) for e in events)
        and isinstance(checkpoint.get("step"), int)
        and isinstance(checkpoint.get("eventSeq"), int)
        and checkpoint["eventSeq"] >= 1
        and isinstance(answer, dict)
        and isinstance(answer.get("offset"), int)
        and isinstance(answer.get("inline"), list)
    )


def resume_point(checkpoint: object) -> int:
    """The id of the last event a resume keeps (events after it are streamed again)."""
    return checkpoint["eventSeq"] if _readable(checkpoint) else 1


def load_state(turn: LiveTurn) -> TurnState:
    """The state to run `turn` from: its checkpoint, or its first step when none can be read."""
    checkpoint = turn.checkpoint if _readable(turn.checkpoint) else initial_checkpoint(turn)
    assert isinstance(checkpoint, dict)
    answer = checkpoint["answer"]
    skipped = answer.get("skipped")
    restores = [
        (r[0], r[1])
        for r in checkpoint.get("restores") or []
        if isinstance(r, list) and len(r) == 2 and isinstance(r[0], int)
    ]
    state = TurnState(
        messages=checkpoint["messages"],
        events=checkpoint["events"],
        registry=TurnRegistry.from_checkpoint(checkpoint),
        step=checkpoint["step"],
        event_seq=checkpoint["eventSeq"],
        position=AnswerPosition(
            offset=answer["offset"],
            has_text=bool(answer.get("hasText")),
            inline=answer["inline"],
            skipped=skipped if isinstance(skipped, dict) else {},
        ),
        restores=restores,
    )
    if state.events:
        # From here on the turn sees the registry its checkpoint held (docs/registry.md),
        # and the stored row must say so: the save replays with this restore.
        state.restores.append((len(state.events), state.registry.to_json()))
    return state


def save_checkpoint(turn_id: uuid.UUID, token: uuid.UUID, state: TurnState) -> None:
    """Store the state after a tool round; `LostTurnError` when this worker no longer owns the turn."""
    with sqlite_write_lock():
        updated = LiveTurn.objects.running_for_worker(turn_id, token).update(checkpoint=state.to_json())
    if not updated:
        raise LostTurnError(str(turn_id))
