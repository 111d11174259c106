"""No stuck turn (issue 28; docs/job-engine.md#stuck-turns): the database refusing a turn's start, in this process.

On the test database (SQLite or PostgreSQL), with the in-process Celery
worker (`live_worker`: the production task `chat.run_live_turn` on the
threads pool) and the recorded model; nothing of ours is replaced. The
database refuses for real, from another connection (`RefusedStart`), from
the moment the task is sent:

- once: the task is retried by Celery (the same task id, sent again) and
  the turn is `done`, stored once;
- past `LIVE_TURN_START_RETRIES`: the turn is `failed` with an `error`
  event `database_unavailable` its client reads, on its stream and on GET
  .../events, never `queued` for ever, and its session takes a new turn;
- a stale task (the turn was queued again since) refused as often leaves
  the turn to its own task.

The other ways a task stops before its turn starts: a POST inside an outer
transaction (tests/live/test_stuck_commit.py), a worker killed after it took
the task (tests/live/test_stuck_workers.py); the stuck bounds at admission
(tests/live/test_stuck_admission.py) and at a worker's start
(tests/live/test_stuck_workers.py).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from chat.models import ChatLog
from citations.live_events import turn_event
from finance.libpq import libpq_params
from live.log import encode
from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus
from live.tasks import send_live_turn
from tests.live.stuck_support import Attempts, post_turn, read_stream, watched_tasks
from tests.live_support import script, step, text

pytestmark = pytest.mark.django_db(transaction=True)

UNAVAILABLE = {"type": "database_unavailable", "message": "This answer could not be started. Please try again."}


@pytest.fixture
def client(maya):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=maya).key}")
    return api


@pytest.fixture
def attempts() -> Iterator[Attempts]:
    with watched_tasks() as seen:
        yield seen


class RefusedStart:
    """The database refusing a turn's start, for real, from another connection, until `release()`.

    SQLite: that connection holds the database's write lock (`BEGIN
    EXCLUSIVE`); the worker's `turn_acquire` begins its transaction
    (`BEGIN IMMEDIATE`), waits out its busy timeout (0.2 s here instead of
    20 s: the `timeout` of the database's OPTIONS, read when a worker thread
    connects, and Celery's Django fixup gives every task a new connection)
    and fails: "database is locked". PostgreSQL: it holds the turn's row
    (`SELECT ... FOR UPDATE`); the worker's `turn_acquire` waits on it and
    the server ends that waiting connection (`pg_terminate_backend`, as a
    restart or a failover would): "terminating connection due to
    administrator command". Either is Django's `OperationalError`.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held = False
        self.terminated: set[int] = set()
        self.holder: Any = None
        self.killer: threading.Thread | None = None
        self.options = connection.settings_dict["OPTIONS"]
        self.timeout = self.options.get("timeout")

    def hold(self, turn_id: str) -> None:
        if connection.vendor == "sqlite":
            self.options["timeout"] = 0.2
            name = connection.settings_dict["NAME"]
            self.holder = sqlite3.connect(name, isolation_level=None, check_same_thread=False)
            self.holder.execute("BEGIN EXCLUSIVE")
        else:
            self.holder = psycopg.connect(**libpq_params(connection.settings_dict))
            row = self.holder.execute("SELECT id FROM chat_live_turns WHERE id = %s FOR UPDATE", [turn_id]).fetchone()
            assert row is not None
            self.killer = threading.Thread(target=self._terminate_waiters, args=(self.holder.info.backend_pid,))
        self.held = True
        if self.killer is not None:
            self.killer.start()

    def _terminate_waiters(self, holder_pid: int) -> None:
        with psycopg.connect(**libpq_params(connection.settings_dict), autocommit=True) as server:
            while True:
                with self.lock:
                    if not self.held:
                        return
                    waiting = server.execute(
                        "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", [holder_pid]
                    ).fetchall()
                    for (pid,) in waiting:
                        if server.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone() == (True,):
                            self.terminated.add(pid)
                time.sleep(0.02)

    def release(self) -> None:
        """The database answers again (safe to call twice, from any thread)."""
        with self.lock:
            if self.held:
                self.held = False
                self.holder.rollback()
                self.holder.close()
        if self.timeout is not None:
            self.options["timeout"] = self.timeout


@pytest.fixture
def refused() -> Iterator[RefusedStart]:
    refusal = RefusedStart()
    try:
        yield refusal
    finally:
        refusal.release()
        if refusal.killer is not None:
            refusal.killer.join(10)


def refuse_the_first_publish(attempts: Attempts, refused: RefusedStart) -> None:
    """The database refuses from the moment the turn's task is first sent (it goes down right after the
    POST's commit)."""

    def hold(turn_id: str, task_id: str, retries: int) -> None:
        if retries == 0 and not refused.held:
            refused.hold(turn_id)

    attempts.on_publish = hold


def test_the_database_refusing_the_start_once_the_task_is_retried_and_the_turn_is_done(
    client, recorded_model, attempts, refused, settings
):
    settings.LIVE_TURN_START_RETRIES = 3
    recorded_model.load([script(step(text("Your balance is $5,000.")))])
    refuse_the_first_publish(attempts, refused)
    attempts.on_retry = refused.release  # back once the worker has been refused once
    session_id = uuid.uuid4()
    events = read_stream(post_turn(client, session_id))

    turn = LiveTurn.objects.get(session_id=session_id)
    task_id = str(turn.task_id)
    names = [name for _, name, _ in events]
    assert names[0] == "turn" and set(names[1:-3]) == {"text"}
    assert names[-3:] == ["citations_summary", "message", "done"]
    assert "".join(data["text"] for _, name, data in events if name == "text") == "Your balance is $5,000."
    assert [seq for seq, _, _ in events] == list(range(1, len(events) + 1))
    assert events[-1][2]["log_id"] == str(turn.id)
    # One refusal, one retry through Celery: the same task (its id the turn's), sent again.
    assert attempts.published == [(task_id, 0), (task_id, 1)]
    assert attempts.started == [(task_id, 0), (task_id, 1)]
    assert attempts.retried == [task_id]
    if connection.vendor == "postgresql":
        assert len(refused.terminated) == 1
    assert (turn.status, turn.resume_count, turn.error) == (LiveTurnStatus.DONE, 0, None)
    assert turn.started_at is not None and turn.last_seq == len(events)
    assert list(ChatLog.objects.values_list("id", "response")) == [(turn.id, "Your balance is $5,000.")]


class ReleaseWhenLogged(logging.Handler):
    """Calls `release` when `live.tasks` says the start was refused for the last time (before the task
    marks the turn failed): the database is back for that write only."""

    def __init__(self, database_back: Callable[[], None]) -> None:
        super().__init__()
        self.database_back = database_back  # not `release`: a Handler's own lock method

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno == logging.ERROR and "refused its start" in record.msg:
            self.database_back()


def test_the_database_refusing_every_retry_the_turn_fails_with_an_error_its_client_reads(
    client, recorded_model, attempts, refused, settings
):
    settings.LIVE_TURN_START_RETRIES = 1
    recorded_model.load([script(step(text("Never said.")))])
    refuse_the_first_publish(attempts, refused)
    handler = ReleaseWhenLogged(refused.release)
    tasks_log = logging.getLogger("live.tasks")
    tasks_log.addHandler(handler)
    try:
        session_id = uuid.uuid4()
        events = read_stream(post_turn(client, session_id))
    finally:
        tasks_log.removeHandler(handler)

    turn = LiveTurn.objects.get(session_id=session_id)
    task_id = str(turn.task_id)
    error = (2, "error", {"error": UNAVAILABLE})
    assert events == [(1, "turn", {"turn_id": str(turn.id), "session_id": str(session_id)}), error]
    # The first start and LIVE_TURN_START_RETRIES=1 retry, both refused; then the turn failed.
    assert attempts.started == [(task_id, 0), (task_id, 1)]
    assert attempts.retried == [task_id]
    if connection.vendor == "postgresql":
        assert len(refused.terminated) == 2
    assert (turn.status, turn.error, turn.last_seq, turn.started_at) == (LiveTurnStatus.FAILED, UNAVAILABLE, 2, None)
    assert turn.finished_at is not None
    assert list(LiveTurnEvent.objects.filter(turn=turn).values_list("seq", "event")) == [(1, "turn"), (2, "error")]
    # A client that reconnects (it held the `turn` event) reads the error, then the stream ends.
    assert read_stream(client.get(f"/api/chat/turns/{turn.id}/events", HTTP_LAST_EVENT_ID="1")) == [error]
    assert client.get(f"/api/chat/turns/{turn.id}/events", HTTP_LAST_EVENT_ID="2").status_code == 204
    assert ChatLog.objects.count() == 0
    # The database is back: the session takes a new turn at once.
    attempts.on_publish = None
    recorded_model.load([script(step(text("Back.")))])
    assert read_stream(post_turn(client, session_id))[-1][1] == "done"


def queued_again(user) -> LiveTurn:
    """A queued turn, as admission writes it, whose task id has changed since its first task was sent
    (`live.sweeps.requeue_orphans`, a worker's start on the embedded broker): that task is stale."""
    turn = LiveTurn.objects.create(
        session_id=uuid.uuid4(), user=user, user_message="Still there?", prompt_version="v5", last_seq=1
    )
    event = turn_event(turn_id=str(turn.id), session_id=str(turn.session_id))
    LiveTurnEvent.objects.create(turn=turn, seq=1, event=event.name, data=encode(event))
    return turn


def test_a_stale_task_refused_by_the_database_leaves_the_turn_to_its_own_task(
    client, recorded_model, attempts, refused, settings, maya
):
    settings.LIVE_TURN_START_RETRIES = 1
    recorded_model.load([script(step(text("Run by its own task.")))])
    turn = queued_again(maya)
    stale = uuid.uuid4()
    refuse_the_first_publish(attempts, refused)
    handler = ReleaseWhenLogged(refused.release)
    tasks_log = logging.getLogger("live.tasks")
    tasks_log.addHandler(handler)
    try:
        send_live_turn(str(turn.id), str(stale))
        deadline = time.monotonic() + 30
        while (str(stale), "SUCCESS") not in attempts.ended:  # refused, retried, refused, given up
            assert time.monotonic() < deadline, attempts.ended
            time.sleep(0.05)
    finally:
        tasks_log.removeHandler(handler)
    assert attempts.started == [(str(stale), 0), (str(stale), 1)]
    assert attempts.ended == [(str(stale), "RETRY"), (str(stale), "SUCCESS")]
    row = LiveTurn.objects.get(pk=turn.id)
    assert (row.status, row.error, row.last_seq) == (LiveTurnStatus.QUEUED, None, 1)
    # The turn's own task runs it.
    attempts.on_publish = None
    send_live_turn(str(turn.id), str(turn.task_id))
    events = read_stream(client.get(f"/api/chat/turns/{turn.id}/events", HTTP_LAST_EVENT_ID="1"))
    assert events[-1][1] == "done" and [seq for seq, _, _ in events] == list(range(2, len(events) + 2))
    assert (LiveTurn.objects.get(pk=turn.id).status, ChatLog.objects.get().response) == ("done", "Run by its own task.")
