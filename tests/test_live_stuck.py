"""No stuck turn (issue 28; docs/job-engine.md#stuck-turns): a task stopped before its turn starts, in this process.

On the test database (SQLite or PostgreSQL), with the in-process Celery
worker (`live_worker`: the production task `chat.run_live_turn` on the
threads pool) and the recorded model; nothing of ours is replaced:

- **the database refusing the start**, for real, from another connection
  (`RefusedStart`), from the moment the task is sent: once, the task is
  retried by Celery (the same task id) and the turn is `done`, stored once;
  past `LIVE_TURN_START_RETRIES`, the turn is `failed` with an `error` event
  `database_unavailable` that its client reads, on its stream and on GET
  .../events, never `queued` for ever;
- **a POST inside an outer transaction**: no task is sent before the
  commit and the turn is not taken; at the commit it runs to `done`; rolled
  back, no turn and no task.

A worker killed before the turn starts, and the stuck bounds, run the
Procfile's processes: tests/test_live_stuck_workers.py.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from celery import signals
from django.db import connection, transaction
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from chat.models import ChatLog, ChatSession, LiveTurn, LiveTurnEvent, LiveTurnStatus
from citations.live_events import turn_event
from live.log import encode
from live.tasks import send_live_turn
from tests.live_support import parse_sse, script, step, text

pytestmark = pytest.mark.django_db(transaction=True)

TASK = "chat.run_live_turn"
UNAVAILABLE = {"type": "database_unavailable", "message": "This answer could not be started. Please try again."}


@pytest.fixture
def client(maya):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=maya).key}")
    return api


def post_turn(client, session_id: uuid.UUID, message: str = "What is my balance?"):
    return client.post(f"/api/chat/sessions/{session_id}/turns/", {"message": message}, format="json")


def read_stream(response, timeout: float = 60.0) -> list[tuple[int, str, Any]]:
    """The events of a streaming response, read to its end in a thread: a turn left waiting fails the test
    after `timeout` instead of holding it (its stream would send keep-alives for ever)."""
    assert response.status_code == 200, response.content
    body: list[bytes] = []

    def read() -> None:
        try:
            body.extend(response.streaming_content)
        finally:
            connection.close()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    assert not reader.is_alive(), f"the stream did not end in {timeout} s: {b''.join(body)[-300:]!r}"
    return parse_sse(b"".join(body))


@contextlib.contextmanager
def celery_signal(signal: Any, receiver: Callable[..., None]) -> Iterator[None]:
    signal.connect(receiver, weak=False)
    try:
        yield
    finally:
        signal.disconnect(receiver)


class Attempts:
    """What Celery reports of the turn tasks: each publish `(task id, retries)` (in the sender's thread,
    before the message reaches the broker), each start of an attempt `(task id, retries)`, each retry, each
    end of an attempt `(task id, state)`."""

    def __init__(self) -> None:
        self.published: list[tuple[str, int]] = []
        self.started: list[tuple[str, int]] = []
        self.retried: list[str] = []
        self.ended: list[tuple[str, str]] = []
        self.on_publish: Callable[[str, str, int], None] | None = None
        self.on_retry: Callable[[], None] | None = None

    def publish(self, sender: Any = None, body: Any = None, headers: Any = None, **kwargs: Any) -> None:
        if sender == TASK:
            self.published.append((headers["id"], headers["retries"]))
            if self.on_publish is not None:
                self.on_publish(body[0][0], headers["id"], headers["retries"])

    def prerun(self, sender: Any = None, task_id: Any = None, task: Any = None, **kwargs: Any) -> None:
        if task is not None and task.name == TASK:
            self.started.append((task_id, task.request.retries))

    def postrun(self, sender: Any = None, task_id: Any = None, task: Any = None, state: Any = None, **kw: Any) -> None:
        if task is not None and task.name == TASK:
            self.ended.append((task_id, state))

    def retry(self, sender: Any = None, request: Any = None, **kwargs: Any) -> None:
        if getattr(sender, "name", None) == TASK:
            self.retried.append(request.id)
            if self.on_retry is not None:
                self.on_retry()


@pytest.fixture
def attempts() -> Iterator[Attempts]:
    seen = Attempts()
    with (
        celery_signal(signals.before_task_publish, seen.publish),
        celery_signal(signals.task_prerun, seen.prerun),
        celery_signal(signals.task_retry, seen.retry),
        celery_signal(signals.task_postrun, seen.postrun),
    ):
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
            self.holder = psycopg.connect(**connection.get_connection_params())
            row = self.holder.execute("SELECT id FROM chat_live_turns WHERE id = %s FOR UPDATE", [turn_id]).fetchone()
            assert row is not None
            self.killer = threading.Thread(target=self._terminate_waiters, args=(self.holder.info.backend_pid,))
        self.held = True
        if self.killer is not None:
            self.killer.start()

    def _terminate_waiters(self, holder_pid: int) -> None:
        with psycopg.connect(**connection.get_connection_params(), autocommit=True) as server:
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
    (`live.engine.requeue_orphans`, a worker's start on the embedded broker): that task is stale."""
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


# --- a POST inside an outer transaction ------------------------------------------------


def visible_elsewhere(turn_id: uuid.UUID) -> bool:
    """Whether another connection (a worker's) sees the turn's row."""
    seen: list[bool] = []

    def look() -> None:
        try:
            seen.append(LiveTurn.objects.filter(pk=turn_id).exists())
        finally:
            connection.close()

    thread = threading.Thread(target=look)
    thread.start()
    thread.join(30)
    return seen == [True]


def test_a_post_inside_an_outer_transaction_sends_its_task_at_the_commit(client, recorded_model, attempts):
    recorded_model.load([script(step(text("Sent at the commit.")))])
    session_id = uuid.uuid4()
    with transaction.atomic():
        response = post_turn(client, session_id)
        assert response.status_code == 200
        turn = LiveTurn.objects.get(session_id=session_id)
        time.sleep(1.5)  # a worker takes a sent task within a second (the in-memory broker polls each second)
        assert attempts.published == [] and attempts.started == []
        assert not visible_elsewhere(turn.id)
        row = LiveTurn.objects.get(pk=turn.id)
        assert (row.status, row.started_at, row.last_seq) == (LiveTurnStatus.QUEUED, None, 1)
    assert attempts.published == [(str(turn.task_id), 0)]  # at the commit, once
    events = read_stream(response)
    assert events[-1][1] == "done" and events[-1][2]["log_id"] == str(turn.id)
    assert attempts.started == [(str(turn.task_id), 0)]
    turn.refresh_from_db()
    assert (turn.status, turn.resume_count) == (LiveTurnStatus.DONE, 0)
    assert list(ChatLog.objects.values_list("id", "response")) == [(turn.id, "Sent at the commit.")]


def test_a_post_inside_an_outer_transaction_rolled_back_leaves_no_turn_and_sends_no_task(
    client, recorded_model, attempts
):
    session_id = uuid.uuid4()
    with transaction.atomic():
        response = post_turn(client, session_id)
        assert response.status_code == 200
        assert LiveTurn.objects.filter(session_id=session_id).count() == 1
        transaction.set_rollback(True)
    response.close()
    time.sleep(1.5)
    assert attempts.published == [] and attempts.started == []
    assert LiveTurn.objects.count() == 0 and LiveTurnEvent.objects.count() == 0
    assert not ChatSession.objects.filter(pk=session_id).exists()
    # The session is free: a POST outside a transaction runs at once.
    recorded_model.load([script(step(text("Now.")))])
    assert read_stream(post_turn(client, session_id))[-1][1] == "done"
    assert attempts.published == [(str(LiveTurn.objects.get().task_id), 0)]
