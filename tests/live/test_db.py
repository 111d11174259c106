"""`live.db`, the one module of live/ that knows which database it runs on (docs/live.md#the-event-log):
`write_transaction()` is a transaction, rolled back by an exception, that this process's writers enter one at
a time on SQLite (`one_writer()`, reentrant); every other module of live/ writes through it."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connection

from live.db import one_writer, write_transaction
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
