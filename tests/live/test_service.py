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
from live.db import admit_postgresql, write_transaction
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
from tests.live.stuck_support import wait_for


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
# name: (rows before: (owner, session or None for a new one, status, created ago, progressed ago or None),
# the outcome, statuses after by row)
Rows = list[tuple[str, uuid.UUID | None, str, dt.timedelta, dt.timedelta | None]]
ADMISSIONS: dict[str, tuple[Rows, object, list[str]]] = {
    "a new session": ([], "admitted", []),
    "another user's turn in the session": ([("sam", SESSION, "done", OLD, OLD)], SessionNotFoundError, ["done"]),
    "at the user's limit": (
        [("maya", None, "running", FRESH, FRESH), ("maya", None, "queued", FRESH, None)],
        TurnLimitError,
        ["running", "queued"],
    ),
    "at the limit, a turn started long ago still writing": (
        [("maya", None, "running", OLD, FRESH), ("maya", None, "queued", FRESH, None)],
        TurnLimitError,
        ["running", "queued"],
    ),
    "at the limit, one of them stuck": (
        [("maya", None, "running", FRESH, FRESH), ("maya", None, "running", OLD, OLD)],
        "admitted",
        ["running", "failed"],
    ),
    "the queue full": (
        [
            ("sam", None, "queued", FRESH, None),
            ("sam", None, "queued", FRESH, None),
            ("ana", None, "queued", FRESH, None),
        ],
        QueueFullError,
        ["queued", "queued", "queued"],
    ),
    "the queue full of turns stuck there": (
        [("sam", None, "queued", OLD, None), ("sam", None, "queued", OLD, None), ("ana", None, "queued", OLD, None)],
        "admitted",
        ["queued", "queued", "queued"],  # other users' stuck turns wait for the sweep
    ),
    "at the limit and the queue full: the limit first": (
        [
            ("maya", None, "running", FRESH, FRESH),
            ("maya", None, "queued", FRESH, None),
            ("sam", None, "queued", FRESH, None),
            ("sam", None, "queued", FRESH, None),
        ],
        TurnLimitError,
        ["running", "queued", "queued", "queued"],
    ),
    "the queue full and the session busy: the queue first": (
        [
            ("maya", SESSION, "queued", FRESH, None),
            ("sam", None, "queued", FRESH, None),
            ("sam", None, "queued", FRESH, None),
        ],
        QueueFullError,
        ["queued", "queued", "queued"],
    ),
    "the session's turn running": ([("maya", SESSION, "running", FRESH, FRESH)], TurnConflictError, ["running"]),
    "the session's turn stuck": ([("maya", SESSION, "running", OLD, OLD)], "admitted", ["failed"]),
    "the session busy, a stuck turn in another": (
        [("maya", SESSION, "running", FRESH, FRESH), ("maya", OTHER_SESSION, "running", OLD, OLD)],
        TurnConflictError,
        ["running", "failed"],
    ),
    "a stuck turn in another session": (
        [("maya", OTHER_SESSION, "queued", OLD, None), ("maya", SESSION, "done", OLD, OLD)],
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
    "name",
    [
        "a new session",
        "another user's turn in the session",
        "at the user's limit",
        "at the limit, a turn started long ago still writing",
        "the queue full",
        "the queue full of turns stuck there",  # other users' turns: maya has none stuck
        "at the limit and the queue full: the limit first",
        "the queue full and the session busy: the queue first",
        "the session's turn running",
    ],
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
            created_at=now - created,
            progressed_at=None if progressed is None else now - progressed,
        )
        for owner, session, status, created, progressed in ADMISSIONS[name][0]
    ]
    return users["maya"], before


def _new_turn(user: Any) -> LiveTurn:
    return LiveTurn(session_id=SESSION, user=user, user_message="hi", prompt_version="v5", status="queued", last_seq=1)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's row lock")
@pytest.mark.django_db(transaction=True)
def test_a_users_second_admission_waits_for_the_first_and_counts_its_turn(settings):
    """Two POSTs of one user to two sessions, one turn left under the limit: the first admission holds the user's
    row until it commits; the second waits for it there, then counts its turn and is refused (without the lock,
    its statement would read the tables without the first's turn and both would be admitted)."""
    settings.LIVE_TURN_MAX_PER_USER = 1
    maya = UserFactory.create(username="maya")
    first_in, let_first_commit = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def first() -> None:
        try:
            turn = _new_turn(maya)
            row = (1, "turn", encode(turn_event(turn_id=str(turn.id), session_id=str(SESSION))))
            with write_transaction():
                found = admit_postgresql(
                    turn, row, max_active=1, max_waiting=100, waiting_since=timezone.now() - dt.timedelta(hours=1)
                )
                first_in.set()
                let_first_commit.wait(10)
            outcome["first"] = found.admitted
        finally:
            connection.close()

    def second() -> None:
        try:
            service._admit(user=maya, session_id=OTHER_SESSION, message="hi", prompt_version="v5")
            outcome["second"] = "admitted"
        except TurnLimitError:
            outcome["second"] = "limit"
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    threads[0].start()
    assert first_in.wait(10)
    threads[1].start()
    try:  # the second waits on the user's row (without the lock it would have been admitted by now)
        wait_for(lambda: _backends_waiting_for_a_row_lock() == 1 or "second" in outcome, "the second's wait", 10)
        assert "second" not in outcome
    finally:
        let_first_commit.set()
        for thread in threads:
            thread.join(10)
    assert outcome == {"first": True, "second": "limit"}
    assert LiveTurn.objects.filter(user=maya).count() == 1


def _backends_waiting_for_a_row_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return int(cursor.fetchone()[0])
