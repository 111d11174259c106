"""Starting, claiming and resuming live turns (docs/live.md, issue 10).

- `turn_start` creates the turn (one running turn per session: a partial
  unique index, so two concurrent POSTs cannot both win), appends its `turn`
  event and starts a worker thread in this process.
- `turn_claim_stale` hands a turn whose worker stopped beating to exactly one
  resumer: a conditional UPDATE of `worker_token` that only one caller can
  win (PostgreSQL re-checks the condition on the locked row; SQLite
  serialises writers). The winner's run numbers its events after the last
  one in the log (`chat.live.checkpoint.resume_rewind`).
- A heartbeat thread per process refreshes `heartbeat_at` of the turns it runs.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from chat.live.checkpoint import initial_checkpoint
from chat.live.events import append_event, sqlite_write_lock
from chat.models import ChatSession, LiveTurn
from citations.live_events import turn_event

__all__ = [
    "SessionNotFoundError",
    "TurnConflictError",
    "start_worker",
    "turn_claim_stale",
    "turn_start",
    "wait_for_workers",
]

logger = logging.getLogger(__name__)


class TurnConflictError(Exception):
    """The session already has a running turn (docs/live.md: 409)."""


class SessionNotFoundError(Exception):
    """The session id belongs to another user (docs/live.md: 404, like a missing one)."""


def turn_start(*, user: Any, session_id: uuid.UUID, message: str, prompt_version: str) -> LiveTurn:
    """Create a running turn in the caller's session (a new session id is the caller's) and start it.

    Raises `SessionNotFoundError` when another user owns `session_id`
    (as a session or through a turn) and `TurnConflictError` when the
    session has a running turn. The turn's first event (`turn`) is in the
    log before this returns.
    """
    owned_elsewhere = (
        ChatSession.objects.filter(pk=session_id).exclude(user=user).exists()
        or LiveTurn.objects.filter(session_id=session_id).exclude(user=user).exists()
    )
    if owned_elsewhere:
        raise SessionNotFoundError(str(session_id))
    turn = LiveTurn(session_id=session_id, user=user, user_message=message, prompt_version=prompt_version)
    try:
        with sqlite_write_lock(), transaction.atomic():
            turn.save(force_insert=True)
            turn.checkpoint = initial_checkpoint(turn)
            turn.save(update_fields=["checkpoint"])
            event = turn_event(turn_id=str(turn.id), session_id=str(session_id))
            append_event(turn.id, turn.worker_token, event, after=0)
    except IntegrityError:
        raise TurnConflictError(str(session_id)) from None
    logger.info("turn %s started in session %s", turn.id, session_id)
    start_worker(turn.id, turn.worker_token)
    return turn


def turn_claim_stale(
    *, turn_id: uuid.UUID | None = None, stale_seconds: float | None = None
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Claim running turns whose heartbeat is older than `stale_seconds` (default `LIVE_TURN_STALE_SECONDS`).

    Only `turn_id` when given. Returns `(turn_id, new worker token)` for each
    turn this caller won; a turn another resumer won first is not returned.
    """
    stale = settings.LIVE_TURN_STALE_SECONDS if stale_seconds is None else stale_seconds
    before = timezone.now() - dt.timedelta(seconds=stale)
    candidates = LiveTurn.objects.filter(status="running", heartbeat_at__lt=before)
    if turn_id is not None:
        candidates = candidates.filter(pk=turn_id)
    claimed = []
    for candidate in candidates.values_list("pk", flat=True):
        token = uuid.uuid4()
        with sqlite_write_lock(), transaction.atomic():
            won = LiveTurn.objects.filter(pk=candidate, status="running", heartbeat_at__lt=before).update(
                worker_token=token, heartbeat_at=timezone.now(), resume_count=F("resume_count") + 1
            )
            if not won:
                continue
            # The log is kept whole: the winner's run goes on after its last id
            # and rewinds what its checkpoint does not hold (docs/live.md#rewind).
        logger.info("turn %s claimed for resume", candidate)
        claimed.append((candidate, token))
    return claimed


# --- workers and heartbeats -------------------------------------------------

_running: dict[uuid.UUID, uuid.UUID] = {}
_workers: list[threading.Thread] = []
_lock = threading.Lock()
_heartbeat_started = False


def start_worker(turn_id: uuid.UUID, token: uuid.UUID) -> threading.Thread:
    """Run the claimed turn in a thread of this process; its heartbeat beats while it runs."""
    thread = threading.Thread(target=_work, args=(turn_id, token), name=f"live-turn-{turn_id}", daemon=True)
    with _lock:
        _running[turn_id] = token
        _workers[:] = [t for t in _workers if t.is_alive()]
        _workers.append(thread)
    _ensure_heartbeat()
    thread.start()
    return thread


def wait_for_workers(timeout: float = 30.0) -> bool:
    """Wait for this process's turn threads to end (commands and tests). True when all ended."""
    deadline = timezone.now() + dt.timedelta(seconds=timeout)
    with _lock:
        threads = list(_workers)
    for thread in threads:
        thread.join(max(0.0, (deadline - timezone.now()).total_seconds()))
    return not any(thread.is_alive() for thread in threads)


def _work(turn_id: uuid.UUID, token: uuid.UUID) -> None:
    from chat.live.runner import run_turn  # here, not at import: the SDK is only a turn's (and avoids a cycle)

    try:
        run_turn(turn_id, token)
    finally:
        with _lock:
            if _running.get(turn_id) == token:
                del _running[turn_id]
        connection.close()


def _ensure_heartbeat() -> None:
    global _heartbeat_started
    with _lock:
        if _heartbeat_started:
            return
        _heartbeat_started = True
    threading.Thread(target=_beat_forever, name="live-turn-heartbeat", daemon=True).start()


def _beat_forever() -> None:
    stop = threading.Event()
    while not stop.wait(settings.LIVE_TURN_HEARTBEAT_SECONDS):
        with _lock:
            running = list(_running.items())
        if not running:
            continue
        try:
            condition = Q()
            for turn_id, token in running:
                condition |= Q(pk=turn_id, worker_token=token)
            with sqlite_write_lock():
                LiveTurn.objects.filter(condition, status="running").update(heartbeat_at=timezone.now())
        except Exception:
            logger.warning("live turn heartbeat failed", exc_info=True)
        finally:
            connection.close()
