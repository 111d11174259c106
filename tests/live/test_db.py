"""`live.db`, the one module of live/ that knows which database it runs on (docs/live.md#the-event-log):
`write_transaction()` is a transaction, rolled back by an exception, that this process's writers enter one at
a time on SQLite (`one_writer()`, reentrant); every other module of live/ writes through it."""

from __future__ import annotations

import ast
import threading
import uuid
from pathlib import Path

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from finance.libpq import libpq_params
from live.db import claim_queued, mark_sent, one_writer, write_transaction
from live.models import LiveTurn, LiveTurnStatus
from tests.factories import UserFactory

LIVE = Path(__file__).resolve().parents[2] / "live"


def _reads_the_vendor(path: Path) -> bool:
    tree = ast.parse(path.read_text(), filename=str(path))
    return any(isinstance(node, ast.Attribute) and node.attr == "vendor" for node in ast.walk(tree))


def test_no_module_of_live_but_db_asks_which_database_it_runs_on():
    modules = sorted(path.relative_to(LIVE).as_posix() for path in LIVE.rglob("*.py") if "migrations" not in path.parts)
    assert "db.py" in modules and "runner.py" in modules
    assert [module for module in modules if _reads_the_vendor(LIVE / module)] == ["db.py"]


def test_no_module_of_live_takes_a_lock_or_a_transaction_of_its_own_around_db_writes():
    # The sites that took `sqlite_write_lock()` beside `transaction.atomic()` name the helper instead.
    offenders = [
        path.name for path in LIVE.rglob("*.py") if path.name != "db.py" and "sqlite_write_lock" in path.read_text()
    ]
    assert offenders == []


@pytest.mark.django_db
def test_a_write_transaction_is_atomic_and_rolled_back_by_an_exception():
    with pytest.raises(RuntimeError, match="refused"), write_transaction():
        assert connection.in_atomic_block
        UserFactory.create(username="written-then-rolled-back")
        raise RuntimeError("refused")
    assert not User.objects.filter(username="written-then-rolled-back").exists()
    with write_transaction():
        UserFactory.create(username="kept")
    assert User.objects.filter(username="kept").exists()


def test_one_writer_adds_no_transaction():
    with one_writer():
        assert not connection.in_atomic_block


def test_nested_writers_of_one_thread_enter_at_once():
    """`append_batch`'s transaction runs inside `live.log`'s `one_writer()`: the lock is reentrant, so a
    nesting never waits for itself (on SQLite it would hang; a thread bounds the wait)."""
    entered = threading.Event()

    def nested() -> None:
        with one_writer(), one_writer():
            entered.set()

    thread = threading.Thread(target=nested, daemon=True)
    thread.start()
    assert entered.wait(timeout=10), "a writer nested in one_writer() waited for itself"
    thread.join(timeout=10)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL locks rows: no lock of this process")
def test_on_postgresql_writers_of_other_threads_are_not_held_back():
    entered = threading.Event()

    def other() -> None:
        with one_writer():
            entered.set()

    with one_writer():
        thread = threading.Thread(target=other, daemon=True)
        thread.start()
        assert entered.wait(timeout=10), "another thread waited for this one's writer on PostgreSQL"
    thread.join(timeout=10)


# --- claim_queued and mark_sent: one statement each -------------------------


def _queued(user, **fields) -> LiveTurn:
    return LiveTurn.objects.create(session_id=uuid.uuid4(), user=user, user_message="hi", prompt_version="v5", **fields)


@pytest.mark.django_db
def test_a_queued_turn_is_claimed_once_and_comes_back_as_written(maya):
    turn = _queued(maya, task_id=uuid.uuid4(), last_seq=1)
    token, now = uuid.uuid4(), timezone.now()
    with CaptureQueriesContext(connection) as queries:
        claimed = claim_queued(turn.id, turn.task_id, token, now)
    assert [q["sql"].split()[0] for q in queries.captured_queries if q["sql"].startswith(("UPDATE", "SELECT"))] == [
        "UPDATE"
    ]
    assert claimed is not None
    row = LiveTurn.objects.get(pk=turn.id)
    assert (claimed.id, claimed.status, claimed.worker_token, claimed.started_at) == (
        turn.id,
        LiveTurnStatus.RUNNING,
        token,
        now,
    )
    # Every field as the row now holds it, the ones the claim did not write included.
    assert {f.attname: getattr(claimed, f.attname) for f in LiveTurn._meta.concrete_fields} == {
        f.attname: getattr(row, f.attname) for f in LiveTurn._meta.concrete_fields
    }
    assert (claimed.user_message, claimed.session_id, claimed.last_seq) == ("hi", turn.session_id, 1)
    assert claim_queued(turn.id, turn.task_id, uuid.uuid4(), now) is None  # running now: not claimed again
    assert LiveTurn.objects.get(pk=turn.id).worker_token == token


@pytest.mark.django_db
def test_a_claim_by_another_task_or_of_no_turn_takes_nothing(maya):
    turn = _queued(maya, task_id=uuid.uuid4())
    assert claim_queued(turn.id, uuid.uuid4(), uuid.uuid4(), timezone.now()) is None  # a stale task
    assert claim_queued(uuid.uuid4(), None, uuid.uuid4(), timezone.now()) is None  # no such turn
    row = LiveTurn.objects.get(pk=turn.id)
    assert (row.status, row.worker_token, row.started_at) == (LiveTurnStatus.QUEUED, turn.worker_token, None)
    assert claim_queued(turn.id, None, uuid.uuid4(), timezone.now()) is not None  # whichever task


@pytest.mark.django_db
def test_a_send_is_marked_once_and_only_for_the_turns_own_task(maya):
    turn = _queued(maya, task_id=uuid.uuid4())
    now = timezone.now()
    assert mark_sent(turn.id, uuid.uuid4(), now) is False  # another task's: not marked
    assert LiveTurn.objects.get(pk=turn.id).sent_at is None
    assert mark_sent(turn.id, turn.task_id, now) is True
    assert mark_sent(turn.id, turn.task_id, timezone.now()) is False  # marked already: kept
    assert LiveTurn.objects.get(pk=turn.id).sent_at == now


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL locks rows; SQLite's writers take turns")
@pytest.mark.django_db(transaction=True)
def test_a_send_mark_never_waits_for_a_row_another_transaction_holds(maya):
    turn = _queued(maya, task_id=uuid.uuid4())
    with psycopg.connect(**libpq_params(connection.settings_dict)) as holder:
        holder.execute("SELECT id FROM chat_live_turns WHERE id = %s FOR UPDATE", [turn.id])
        # `lock_timeout` would turn a wait into an error: the mark returns at once instead, unmarked.
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")
        assert mark_sent(turn.id, turn.task_id, timezone.now()) is False
        holder.rollback()
    with connection.cursor() as cursor:
        cursor.execute("RESET lock_timeout")
    assert mark_sent(turn.id, turn.task_id, timezone.now()) is True
