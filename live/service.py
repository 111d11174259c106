"""Admitting live turns and queueing them for job-engine workers (docs/live.md#admission, docs/job-engine.md).

`turn_start` admits a turn (model configured, the session the caller's, the
user's limit, the queue's depth), creates it `queued` with its `turn` event,
and queues the Celery task `chat.run_live_turn` once the row is committed
(`transaction.on_commit`: inside an outer transaction, at its commit; a
worker never looks for a turn it cannot see yet). The task's id is the
turn's `task_id`, so a worker knows a stale task from the turn's own
(`live.engine.turn_acquire`). What the turn sends the model (the session's
history) is read by the worker, not here.

Admission does its database work `LIVE_TURN_ADMISSIONS_AT_ONCE` at a time
per process: a burst of POSTs waits for a slot (up to
`LIVE_TURN_ADMISSION_WAIT_SECONDS`, then 503) instead of taking every
pooled connection from the streams. Under ASGI the stream process's gate
(`live.admission`) holds the POSTs before they reach Django; here, the
same bound for any caller, waited for with no pooled connection held (the
one authentication took is given back before a wait) and given back
before the slot. The user's turns stuck past their bound
(`live.engine.turns_stuck`) are ended first, so a session is never 409 for
ever, and the queue's depth counts no stuck turn (nor is it 503 for ever).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
import uuid
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from chat.models import ChatSession
from citations.live_events import StreamEvent, turn_event
from live.configured import NOT_CONFIGURED, model_configured
from live.db import Row, admit_postgresql, mark_sent, reads_in_one_statement, write_transaction
from live.engine import end_stuck, fail_unstarted, turns_stuck
from live.log import encode, release_connection
from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus
from telemetry import tracing

__all__ = [
    "AdmissionBusyError",
    "ModelNotConfiguredError",
    "QueueFullError",
    "QueueUnavailableError",
    "SessionNotFoundError",
    "TurnConflictError",
    "TurnLimitError",
    "enqueue",
    "turn_start",
]

logger = logging.getLogger(__name__)


class TurnConflictError(Exception):
    """The session already has a queued or running turn (docs/live.md: 409)."""


class SessionNotFoundError(Exception):
    """The session id belongs to another user (docs/live.md: 404, like a missing one)."""


class TurnLimitError(Exception):
    """The user already has `LIVE_TURN_MAX_PER_USER` queued or running turns (429)."""


class QueueFullError(Exception):
    """`LIVE_TURN_MAX_QUEUED` turns already wait for a worker (503)."""


class QueueUnavailableError(Exception):
    """The broker refused the turn's task; the turn is failed (503)."""


class ModelNotConfiguredError(Exception):
    """Neither an API key nor a base URL is configured (503)."""


class AdmissionBusyError(Exception):
    """This process admitted `LIVE_TURN_ADMISSIONS_AT_ONCE` turns for `LIVE_TURN_ADMISSION_WAIT_SECONDS` (503)."""


_admissions = threading.BoundedSemaphore(settings.LIVE_TURN_ADMISSIONS_AT_ONCE)


@tracing.traced("start_turn", result_attributes=lambda turn: {"silvia.turn.id": str(turn.id)})
def turn_start(*, user: Any, session_id: uuid.UUID, message: str, prompt_version: str) -> LiveTurn:
    """Admit and queue a turn in the caller's session (a new session id is the caller's).

    Raises, in this order: `ModelNotConfiguredError`; `AdmissionBusyError`
    when this process is admitting as many turns as it may for too long;
    `SessionNotFoundError` when another user owns `session_id` (as a session
    or through a turn); `TurnLimitError` past the user's limit; `QueueFullError`
    past the queue's depth; `TurnConflictError` when the session has a queued
    or running turn; `QueueUnavailableError` when the broker refuses the task
    (the turn is then failed). The turn's first event (`turn`) is in the log
    before this returns.
    """
    if not model_configured():
        raise ModelNotConfiguredError(NOT_CONFIGURED)
    if not _admissions.acquire(blocking=False):
        release_connection()  # a wait ahead: the wait first, the connection after (none held while waiting)
        if not _admissions.acquire(timeout=settings.LIVE_TURN_ADMISSION_WAIT_SECONDS):
            raise AdmissionBusyError()
    try:
        turn = _admit(user=user, session_id=session_id, message=message, prompt_version=prompt_version)
    finally:
        release_connection()  # given back before the slot: the next admission finds it in the pool
        _admissions.release()
    logger.info("turn %s queued in session %s", turn.id, session_id)
    return turn


def _admit(*, user: Any, session_id: uuid.UUID, message: str, prompt_version: str) -> LiveTurn:
    turn = LiveTurn(
        session_id=session_id,
        user=user,
        user_message=message,
        prompt_version=prompt_version,
        status=LiveTurnStatus.QUEUED,
        last_seq=1,
    )
    event = turn_event(turn_id=str(turn.id), session_id=str(session_id))
    if reads_in_one_statement():
        admitted = _admit_in_two_statements(turn, (1, event.name, encode(event)))
        if admitted is not None:
            return admitted
    return _admit_with_querysets(turn, event)


def _admit_in_two_statements(turn: LiveTurn, first: Row) -> LiveTurn | None:
    """PostgreSQL's admission (`live.db.admit_postgresql`): the user's row locked, then the checks and the
    inserts in one statement. It decides as `_admit_with_querysets` does (tests/live/test_service.py holds
    the two to the same rules); where that one would end a stuck turn before its insert (the user at their
    limit, or the session busy, with a stuck turn among theirs), nothing is written and None sends the
    admission there. Raises what `_admit_with_querysets` raises."""
    admitted_beside: list[LiveTurn] = []  # the user's stuck turns in other sessions, once this one is admitted
    try:
        with write_transaction():
            found = admit_postgresql(
                turn,
                first,
                max_active=settings.LIVE_TURN_MAX_PER_USER,
                max_waiting=settings.LIVE_TURN_MAX_QUEUED,
                waiting_since=_waiting_since(),
            )
            stuck = turns_stuck(found.active)
            if found.elsewhere:
                raise SessionNotFoundError(str(turn.session_id))
            if not found.admitted and stuck:
                return None
            if len(found.active) >= settings.LIVE_TURN_MAX_PER_USER:
                raise TurnLimitError(str(turn.user_id))
            if found.waiting >= settings.LIVE_TURN_MAX_QUEUED:
                raise QueueFullError()
            if not found.admitted:  # the session's own turn, queued or running
                raise TurnConflictError(str(turn.session_id))
            admitted_beside = stuck
            transaction.on_commit(lambda: enqueue(turn))
    except IntegrityError:
        return None  # another user's admission took the session meanwhile: the querysets say 404
    finally:
        end_stuck(admitted_beside)  # as `_admit_with_querysets` ends them, the broker refusing the task or not
    return turn


def _admit_with_querysets(turn: LiveTurn, event: StreamEvent) -> LiveTurn:
    user, session_id = turn.user, turn.session_id
    owned_elsewhere = (
        ChatSession.objects.filter(pk=session_id).exclude(user=user).exists()
        or LiveTurn.objects.filter(session_id=session_id).exclude(user=user).exists()
    )
    if owned_elsewhere:
        raise SessionNotFoundError(str(session_id))
    stuck: list[LiveTurn] = []
    try:
        with write_transaction():
            # One admission at a time per user (PostgreSQL locks the user's row;
            # SQLite's IMMEDIATE transactions already run one at a time).
            get_user_model().objects.select_for_update().filter(pk=user.pk).first()
            active = list(LiveTurn.objects.active().filter(user=user))
            stuck = turns_stuck(active)
            if len(active) - len(stuck) >= settings.LIVE_TURN_MAX_PER_USER:
                raise TurnLimitError(str(user.pk))
            if _waiting().count() >= settings.LIVE_TURN_MAX_QUEUED:
                raise QueueFullError()
            if any(other.session_id == session_id for other in stuck):
                end_stuck([other for other in stuck if other.session_id == session_id])
            turn.save(force_insert=True)
            LiveTurnEvent.objects.create(turn=turn, seq=1, event=event.name, data=encode(event))
            transaction.on_commit(lambda: enqueue(turn))
    except IntegrityError:
        raise TurnConflictError(str(session_id)) from None
    finally:
        end_stuck([other for other in stuck if other.session_id != session_id])
    return turn


def _waiting_since() -> dt.datetime:
    return timezone.now() - dt.timedelta(seconds=settings.LIVE_TURN_QUEUED_TIMEOUT_SECONDS)


def _waiting() -> QuerySet[LiveTurn]:
    """The turns that wait for a worker: queued, within `LIVE_TURN_QUEUED_TIMEOUT_SECONDS`. A turn queued
    longer is stuck (`live.engine.turns_stuck`), ended by its user's next admission or a worker's start:
    it waits for no worker, and must not fill the queue for everyone until then."""
    return LiveTurn.objects.filter(status=LiveTurnStatus.QUEUED, created_at__gte=_waiting_since())


def enqueue(turn: LiveTurn) -> None:
    """Send the turn's task, its id the turn's `task_id`, then mark the turn `sent_at` (while that task is
    still its own). Raises `QueueUnavailableError` (the turn failed) when the broker refuses it.

    The turn's row is committed before this runs: a process that dies in between leaves a queued turn with
    no `sent_at`, which the workers' sweep sends again within seconds (`live.sweeps.resend_unsent`).
    """
    from live.tasks import send_live_turn  # loads Celery on the first turn, not at start-up

    if settings.LIVE_TURN_TEST_PAUSE_BEFORE_SEND_SECONDS:  # test only: a kill lands between commit and send
        time.sleep(settings.LIVE_TURN_TEST_PAUSE_BEFORE_SEND_SECONDS)
    try:
        send_live_turn(str(turn.id), str(turn.task_id))
    except Exception as error:  # kombu's OperationalError after the publish retries, a bad URL, ...
        logger.error("turn %s: the broker refused its task (%s)", turn.id, type(error).__name__)
        fail_unstarted(turn.id, "queue_unavailable", "The service could not queue this question. Please try again.")
        raise QueueUnavailableError(str(turn.id)) from None
    _mark_sent(turn)


def _mark_sent(turn: LiveTurn) -> None:
    """`sent_at` on the turn while `turn.task_id` is still its own, never waiting for the row: a worker may
    hold it (taking the turn, which then is no longer queued), and a POST must not wait on that
    (`live.db.mark_sent`, one statement). Not marked (the row held, the database gone), a turn still queued
    is sent again by a sweep, under a new task id: its first task then does nothing."""
    try:
        mark_sent(turn.id, turn.task_id, timezone.now())
    except DatabaseError as error:
        logger.warning(
            "turn %s: its send could not be marked (%s); a sweep sends it again", turn.id, type(error).__name__
        )
