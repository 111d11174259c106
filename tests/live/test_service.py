"""Admission (`live.service`, docs/live.md#admission): a POST that must wait for an admission slot waits with no
pooled connection held, and past `LIVE_TURN_ADMISSION_WAIT_SECONDS` is `AdmissionBusyError`; the rules decided
alike by PostgreSQL's two statements and by the querysets."""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from citations.live_events import turn_event
from live import service
from live.log import encode
from live.models import LiveTurn, LiveTurnEvent
from live.service import (
    AdmissionBusyError,
    QueueFullError,
    SessionNotFoundError,
    TurnConflictError,
    TurnLimitError,
    turn_start,
)
from tests.factories import UserFactory


@pytest.mark.django_db(transaction=True)
def test_a_post_waiting_for_a_slot_holds_no_pooled_connection_and_is_refused_after_its_wait(settings):
    settings.ANTHROPIC_BASE_URL = "http://127.0.0.1:9"  # configured; no model is called at admission
    settings.LIVE_TURN_ADMISSION_WAIT_SECONDS = 0.3
    user = UserFactory.create(username="maya")
    held = [service._admissions.acquire(blocking=False) for _ in range(django_settings.LIVE_TURN_ADMISSIONS_AT_ONCE)]
    assert all(held)  # every slot taken, as by as many admissions running
    outcome: dict[str, object] = {}

    def post() -> None:
        try:
            list(LiveTurn.objects.filter(user=user))  # authentication's query: this thread holds a connection
            outcome["before"] = connection.connection is not None
            started = time.monotonic()
            try:
                turn_start(user=user, session_id=uuid.uuid4(), message="hi", prompt_version="v5")
            except AdmissionBusyError:
                outcome["refused after"] = time.monotonic() - started
            outcome["after"] = connection.connection is not None
        finally:
            connection.close()

    try:
        thread = threading.Thread(target=post)
        thread.start()
        thread.join(10)
    finally:
        for _ in held:
            service._admissions.release()
    pooled = bool(connection.settings_dict.get("OPTIONS", {}).get("pool"))
    assert outcome["before"] is True
    assert 0.3 <= float(outcome["refused after"]) < 1.0  # type: ignore[arg-type]
    # With the pool (PostgreSQL) the connection went back before the wait; without one it stays (SQLite).
    assert outcome["after"] is (not pooled)
    assert LiveTurn.objects.count() == 0


# The admission's rules (docs/live.md#admission), decided by hand for each state of the tables, held to both of its
# paths: `_admit` (on PostgreSQL `live.db.admit_postgresql`'s two statements, falling back to the querysets where a
# stuck turn must end first) and `_admit_with_querysets` (SQLite's, and the fallback). Limits: 2 turns a user,
# 3 waiting; a queued turn is stuck after 60 s, a running one after 60 s with no write.
FRESH, OLD = dt.timedelta(seconds=1), dt.timedelta(seconds=120)
SESSION = uuid.UUID("00000000-0000-4000-8000-00000000000a")
OTHER_SESSION = uuid.UUID("00000000-0000-4000-8000-00000000000b")
# name: (rows before: (owner, session or None for a new one, status, age), the outcome, statuses after by row)
ADMISSIONS: dict[str, tuple[list[tuple[str, uuid.UUID | None, str, dt.timedelta]], object, list[str]]] = {
    "a new session": ([], "admitted", []),
    "another user's turn in the session": ([("sam", SESSION, "done", OLD)], SessionNotFoundError, ["done"]),
    "at the user's limit": (
        [("maya", None, "running", FRESH), ("maya", None, "queued", FRESH)],
        TurnLimitError,
        ["running", "queued"],
    ),
    "at the limit, one of them stuck": (
        [("maya", None, "running", FRESH), ("maya", None, "running", OLD)],
        "admitted",
        ["running", "failed"],
    ),
    "the queue full": (
        [("sam", None, "queued", FRESH), ("sam", None, "queued", FRESH), ("ana", None, "queued", FRESH)],
        QueueFullError,
        ["queued", "queued", "queued"],
    ),
    "the queue full of turns stuck there": (
        [("sam", None, "queued", OLD), ("sam", None, "queued", OLD), ("ana", None, "queued", OLD)],
        "admitted",
        ["queued", "queued", "queued"],  # other users' stuck turns wait for the sweep
    ),
    "the session's turn running": ([("maya", SESSION, "running", FRESH)], TurnConflictError, ["running"]),
    "the session's turn stuck": ([("maya", SESSION, "running", OLD)], "admitted", ["failed"]),
    "a stuck turn in another session": (
        [("maya", OTHER_SESSION, "queued", OLD), ("maya", SESSION, "done", OLD)],
        "admitted",
        ["failed", "done"],
    ),
}


@pytest.mark.parametrize("path", ["_admit", "_admit_with_querysets"])
@pytest.mark.parametrize("name", list(ADMISSIONS))
def test_admission_decides_by_its_rules_on_either_path(db, settings, path, name):
    _, outcome, after = ADMISSIONS[name]
    maya, before = _tables_as_in(name, settings)
    turn = _new_turn(maya)
    event = turn_event(turn_id=str(turn.id), session_id=str(SESSION))

    def admit() -> None:
        if path == "_admit":
            service._admit(user=maya, session_id=SESSION, message="hi", prompt_version="v5")
        else:
            service._admit_with_querysets(turn, event)

    if outcome == "admitted":
        admit()
        admitted = LiveTurn.objects.get(session_id=SESSION, status="queued")
        assert (admitted.user_id, admitted.user_message, admitted.last_seq) == (maya.pk, "hi", 1)
        assert list(LiveTurnEvent.objects.filter(turn=admitted).values_list("seq", "event")) == [(1, "turn")]
    else:
        with pytest.raises(outcome):  # type: ignore[call-overload]
            admit()
        assert not LiveTurn.objects.filter(user_message="hi").exists()
    assert [LiveTurn.objects.get(pk=row.pk).status for row in before] == after


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's admission statements")
@pytest.mark.parametrize(
    "name", [name for name, (rows, _, _) in ADMISSIONS.items() if all(r[3] == FRESH for r in rows)]
)
def test_with_no_stuck_turn_postgresql_decides_in_two_statements(db, settings, name):
    """No turn stuck: the user's lock and the admission's statement decide, the querysets never asked."""
    _, outcome, _ = ADMISSIONS[name]
    maya, _ = _tables_as_in(name, settings)
    turn = _new_turn(maya)
    first = (1, "turn", encode(turn_event(turn_id=str(turn.id), session_id=str(SESSION))))
    with CaptureQueriesContext(connection) as queries:
        if outcome == "admitted":
            assert service._admit_in_two_statements(turn, first) is turn
        else:
            with pytest.raises(outcome):  # type: ignore[call-overload]
                service._admit_in_two_statements(turn, first)
    statements = [
        q["sql"] for q in queries.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE", "ROLLBACK"))
    ]
    assert len(statements) == 2 and statements[0].endswith("FOR UPDATE"), statements


def _tables_as_in(name: str, settings) -> tuple[Any, list[LiveTurn]]:
    """The users maya, sam and ana, and the turns of `ADMISSIONS[name]`; maya and the turns."""
    settings.LIVE_TURN_MAX_PER_USER, settings.LIVE_TURN_MAX_QUEUED = 2, 3
    settings.LIVE_TURN_QUEUED_TIMEOUT_SECONDS = settings.LIVE_TURN_STALLED_SECONDS = 60
    users = {username: UserFactory.create(username=username) for username in ("maya", "sam", "ana")}
    now = timezone.now()
    before = [
        LiveTurn.objects.create(
            session_id=session or uuid.uuid4(),
            user=users[owner],
            user_message="fee?",
            prompt_version="v5",
            status=status,
            created_at=now - age,
            progressed_at=now - age if status == "running" else None,
        )
        for owner, session, status, age in ADMISSIONS[name][0]
    ]
    return users["maya"], before


def _new_turn(user: Any) -> LiveTurn:
    return LiveTurn(session_id=SESSION, user=user, user_message="hi", prompt_version="v5", status="queued", last_seq=1)
