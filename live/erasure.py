"""Deleting a session and erasing a user's chats (SPEC 16, docs/api.md#deleting-a-session, docs/privacy.md).

A session's data lives in two apps: its `chat_sessions` row and
`ai_chat_logs` rows (`chat`), and its live turns with their event logs and
checkpoints (`live`). `live` sees both (apps import one way: `chat` cannot
import `live`), so the one function that removes a session whole is here.

`session_delete` stops the session's queued or running turn first
(`live.stops.turn_stop`: its streams end with `error` `stopped`, its worker
lets go), gives its streams one poll to read that event, then deletes everything of the session in one transaction. A
worker still finishing a turn of it meets no row: its writes are fenced, so
nothing of it comes back. `user_chats_erase` does that for each session of a
user (each its own transaction), with a dry run that only counts.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from chat.models import ChatLog, ChatSession
from chat.replica import note_user_writes
from live.db import write_transaction
from live.models import LiveTurn, LiveTurnEvent
from live.stops import TurnEndedError, turn_stop

__all__ = ["Erased", "session_delete", "user_chats_erase"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Erased:
    """What a deletion removed (or, in a dry run, would remove): rows of each table."""

    sessions: int = 0
    turns: int = 0  # ai_chat_logs rows
    live_turns: int = 0
    events: int = 0  # chat_live_turn_events rows

    def __add__(self, other: Erased) -> Erased:
        return Erased(
            self.sessions + other.sessions,
            self.turns + other.turns,
            self.live_turns + other.live_turns,
            self.events + other.events,
        )

    def summary(self) -> str:
        """`4 sessions, 15 chat logs, 3 live turns, 310 events`."""
        counts: list[tuple[int, str]] = [(self.sessions, "session"), (self.turns, "chat log")]
        counts += [(self.live_turns, "live turn"), (self.events, "event")]
        return ", ".join(f"{n} {word}{'' if n == 1 else 's'}" for n, word in counts)


def _rows(user_id: Any, session_id: uuid.UUID) -> tuple[Any, Any, Any, Any]:
    sessions = ChatSession.objects.filter(pk=session_id, user_id=user_id)
    logs = ChatLog.objects.filter(session_id=session_id, user_id=user_id)
    live_turns = LiveTurn.objects.filter(session_id=session_id, user_id=user_id)
    events = LiveTurnEvent.objects.filter(turn__in=live_turns.values("pk"))
    return sessions, logs, live_turns, events


def session_delete(*, user: Any, session_id: uuid.UUID, dry_run: bool = False) -> Erased | None:
    """Delete the caller's session `session_id` and everything of it (SPEC 16); what was deleted.

    None when the caller has no such session (another user's or a missing
    one: the API's 404). A session whose only turn is still live (its row is
    written with the turn) counts as the caller's. Its queued or running turn
    is stopped first; then its `ai_chat_logs` rows, live turns, their events
    and checkpoints and the session row go in one transaction. `dry_run`
    counts and changes nothing.
    """
    sessions, logs, live_turns, events = _rows(user.pk, session_id)
    if not sessions.exists() and not live_turns.exists():
        return None
    if dry_run:
        return Erased(sessions.count(), logs.count(), live_turns.count(), events.count())
    for turn_id in live_turns.active().values_list("pk", flat=True):
        with contextlib.suppress(TurnEndedError):  # it ended meanwhile
            turn_stop(user=user, turn_id=turn_id)
    # Its open streams end with `stopped` whether they read the stop's event before the rows go or find the
    # turn gone after (live.stream.VANISHED): no wait here.
    with write_transaction():
        # Children first, each one statement: events, live turns, turns, the session.
        erased = Erased(
            events=events.delete()[0],
            live_turns=live_turns.delete()[0],
            turns=logs.delete()[0],
            sessions=sessions.delete()[0],
        )
        note_user_writes([user.pk])  # a read on a replica right after sees the session gone (chat.replica)
    logger.info("session %s deleted by its user (%s)", session_id, erased.summary())
    return erased


def user_chats_erase(*, user: Any, dry_run: bool = False) -> Erased:
    """Erase every chat session of `user` (`session_delete` each: a transaction per session); what was erased,
    or with `dry_run` what would be. Their accounts and the user stay (docs/privacy.md#erasing-a-users-chats)."""
    session_ids = set(ChatSession.objects.filter(user_id=user.pk).values_list("pk", flat=True))
    session_ids |= set(LiveTurn.objects.filter(user_id=user.pk).values_list("session_id", flat=True))
    total = Erased()
    for session_id in sorted(session_ids, key=str):
        erased = session_delete(user=user, session_id=session_id, dry_run=dry_run)
        total += erased or Erased()
    return total
