"""No stuck turn (issue 28; docs/job-engine.md): a worker killed before its turn starts, and a worker's start.

The Procfile's `stream` and `worker` processes (tests/procfile.py) on the
test database (SQLite or PostgreSQL), the recorded model over HTTP, a real
HTTP client reading SSE:

- **a worker killed between taking the message and starting the turn**. On
  RabbitMQ: the worker has received the task (acknowledged late), its
  `turn_acquire` waits on a lock the test holds (SQLite's write lock; on
  PostgreSQL the turn's row), and it is SIGKILLed there; RabbitMQ gives the
  task to the next worker, which runs the turn from its start. On the
  embedded broker (no redelivery): the message's row is marked taken in the
  broker's SQLite file as kombu's transport marks it when a worker receives it, and that
  worker is gone; the next worker's start queues the turn again with a new
  task id and runs it, and the old message, put back, does nothing;
- **a worker's start** ends the turns stuck past their bounds (`queued`
  past `LIVE_TURN_QUEUED_TIMEOUT_SECONDS`, `running` with no write for
  `LIVE_TURN_STALLED_SECONDS`) with an `error` event `stuck` their streams
  deliver, and starts or resumes the others. The turns are made for real
  (a killed worker, no worker); only their clocks are moved back past the
  default bounds (`backdate`), as if the test had waited that long.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from chat.models import ChatLog
from finance.libpq import libpq_params
from live.models import LiveTurnStatus
from tests.live.stuck_support import (
    STUCK,
    Turn,
    backdate,
    consecutive,
    env_for,
    needs_rabbitmq,
    quick_answer,
    slow_answer,
    token_for,
    wait_for,
)
from tests.procfile import Stack, embedded_env, rabbitmq_env

pytestmark = pytest.mark.django_db(transaction=True)

STALE = "a stale task (the turn was queued again) does nothing"


class StartHeld:
    """A lock the test holds so that a worker's `turn_acquire` waits: SQLite's write lock (`BEGIN
    EXCLUSIVE`; readers go on), PostgreSQL's lock on the turn's row (`SELECT ... FOR UPDATE`)."""

    def __init__(self, turn_id: uuid.UUID) -> None:
        self.turn_id = turn_id
        self.holder: Any = None

    def __enter__(self) -> StartHeld:
        if connection.vendor == "sqlite":
            self.holder = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
            self.holder.execute("BEGIN EXCLUSIVE")
        else:
            self.holder = psycopg.connect(**libpq_params(connection.settings_dict))
            self.holder.execute("SELECT id FROM chat_live_turns WHERE id = %s FOR UPDATE", [self.turn_id])
        return self

    def waiting(self) -> int:
        """PostgreSQL: how many connections wait for the held row."""
        with psycopg.connect(**libpq_params(connection.settings_dict), autocommit=True) as server:
            row = server.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                [self.holder.info.backend_pid],
            ).fetchone()
        return int(row[0]) if row else 0

    def __exit__(self, *exc: object) -> None:
        self.holder.rollback()
        self.holder.close()


def received(worker, task_id: uuid.UUID) -> bool:
    return f"Task chat.run_live_turn[{task_id}] received" in worker.output()


def test_rabbitmq_a_worker_killed_after_it_received_the_task_another_worker_runs_the_turn(
    recorded_model_server, tmp_path
):
    needs_rabbitmq()
    recorded_model_server.load([quick_answer("Answered by the next worker.")])
    stack = Stack(env_for(recorded_model_server, rabbitmq_env()), tmp_path)
    try:
        web = stack.stream()  # no worker yet: the task waits in RabbitMQ
        turn = Turn(web, token_for("maya"))
        task_id = turn.row().task_id
        with StartHeld(turn.id) as held:
            doomed = stack.worker()
            wait_for(lambda: received(doomed, task_id), "the worker to receive the task")
            if connection.vendor == "postgresql":
                wait_for(lambda: held.waiting() == 1, "its turn_acquire to wait for the row")
            doomed.kill()  # it held the message, unacknowledged (acks_late), and had not started the turn
        row = turn.row()
        assert (row.status, row.started_at, row.resume_count) == (LiveTurnStatus.QUEUED, None, 0)

        rescuer = stack.worker()
        events = turn.rest()
        assert events[-1][1] == "done" and events[-1][2]["log_id"] == str(turn.id) and consecutive(events)
        assert "".join(data["text"] for _, name, data in events if name == "text") == "Answered by the next worker."
        assert received(rescuer, task_id)  # the same task, redelivered
        row = turn.row()
        assert (row.status, row.task_id, row.resume_count) == (LiveTurnStatus.DONE, task_id, 0)
        assert row.started_at is not None
        assert list(ChatLog.objects.values_list("id", flat=True)) == [turn.id]
    finally:
        stack.close()


def queue_messages(folder: Path) -> list[tuple[int, dict[str, Any]]]:
    """The live turns' messages waiting in the embedded broker's SQLite file in `folder`: (row id, message),
    read from kombu's SQLAlchemy transport's tables (a taken message is a row with `visible` false)."""
    with contextlib.closing(sqlite3.connect(folder / "broker.sqlite3")) as broker:
        rows = broker.execute(
            "SELECT m.id, m.payload FROM kombu_message m JOIN kombu_queue q ON q.id = m.queue_id"
            " WHERE q.name = ? AND m.visible ORDER BY m.id",
            (settings.CELERY_TASK_DEFAULT_QUEUE,),
        ).fetchall()
    return [(row_id, json.loads(payload)) for row_id, payload in rows]


def set_visible(folder: Path, row_id: int, visible: bool) -> None:
    """Mark the message `row_id` taken (False: what kombu's get does) or waiting again (True)."""
    with contextlib.closing(sqlite3.connect(folder / "broker.sqlite3", timeout=20)) as broker, broker:
        broker.execute("UPDATE kombu_message SET visible = ? WHERE id = ?", (visible, row_id))


def test_embedded_broker_the_worker_that_took_the_message_died_the_next_one_runs_the_turn_the_old_message_does_nothing(
    recorded_model_server, tmp_path
):
    recorded_model_server.load([slow_answer()])
    broker = tmp_path / "broker"
    stack = Stack(env_for(recorded_model_server, embedded_env(broker)), tmp_path)
    try:
        web = stack.stream()
        turn = Turn(web, token_for("maya"))
        old_task = turn.row().task_id
        ((message, body),) = queue_messages(broker)
        assert body["headers"]["id"] == str(old_task)
        # A worker takes a message by marking its row taken (kombu's SQLAlchemy transport); that worker
        # died before its turn_acquire: the message is gone with it, the turn still queued.
        set_visible(broker, message, False)
        assert (turn.row().status, turn.row().started_at) == (LiveTurnStatus.QUEUED, None)

        worker = stack.worker()  # at its start: the queued turn is sent again, with a new task id
        wait_for(lambda: turn.row().status == LiveTurnStatus.RUNNING, "the turn to start")
        new_task = turn.row().task_id
        assert new_task != old_task
        assert "embedded worker: 1 turn(s) a stopped worker held queued again" in worker.output()
        set_visible(broker, message, True)  # the old message back, while the turn runs
        wait_for(lambda: STALE in worker.output(), "the old message to be taken")

        events = turn.rest()
        assert events[-1][1] == "done" and consecutive(events)
        assert [name for _, name, _ in events].count("turn") == 1
        row = turn.row()
        # Not taken over by the old task (resume_count would be 1), not run twice.
        assert (row.status, row.task_id, row.resume_count) == (LiveTurnStatus.DONE, new_task, 0)
        assert worker.output().count(STALE) == 1
        assert queue_messages(broker) == []
        assert list(ChatLog.objects.values_list("id", flat=True)) == [turn.id]
    finally:
        stack.close()


def test_a_workers_start_ends_the_stuck_turns_and_runs_the_others(recorded_model_server, tmp_path):
    recorded_model_server.load([slow_answer()])
    stack = Stack(env_for(recorded_model_server, embedded_env(tmp_path / "broker")), tmp_path)
    try:
        web, doomed = stack.stream(), stack.worker()
        maya, bo = token_for("maya"), token_for("bo")
        stalled, resumable = Turn(web, maya), Turn(web, maya)
        wait_for(lambda: min(stalled.row().last_seq, resumable.row().last_seq) >= 3, "both turns to stream")
        doomed.kill()
        stalled_seq = stalled.row().last_seq
        lost, waiting = Turn(web, bo), Turn(web, bo)
        backdate(stalled, "progressed_at", settings.LIVE_TURN_STALLED_SECONDS + 1)
        backdate(resumable, "progressed_at", settings.LIVE_TURN_STALLED_SECONDS - 60)
        backdate(lost, "created_at", settings.LIVE_TURN_QUEUED_TIMEOUT_SECONDS + 1)
        backdate(waiting, "created_at", settings.LIVE_TURN_QUEUED_TIMEOUT_SECONDS - 60)

        recorded_model_server.load([quick_answer("Answered after the restart.")])
        worker = stack.worker()
        assert "2 stuck turn(s) ended" in worker.output()
        assert "embedded worker: 2 turn(s) a stopped worker held queued again" in worker.output()

        events = stalled.rest()
        assert events[-1] == (stalled_seq + 1, "error", {"error": STUCK}) and consecutive(events)
        assert lost.rest() == [(1, "turn", lost.read[0][2]), (2, "error", {"error": STUCK})]
        for turn in (stalled, lost):
            assert (turn.row().status, turn.row().error) == (LiveTurnStatus.FAILED, STUCK)
        # Within their bounds: started or resumed, to their end.
        for turn, resumes in ((resumable, 1), (waiting, 0)):
            assert turn.rest()[-1][1] == "done"
            row = turn.row()
            assert (row.status, row.error, row.resume_count) == (LiveTurnStatus.DONE, None, resumes)
        assert sorted(ChatLog.objects.values_list("response", flat=True)) == ["Answered after the restart."] * 2
    finally:
        stack.close()
