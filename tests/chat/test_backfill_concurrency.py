"""The backfill beside concurrent writers (docs/backfill.md): a write between scan and lock is kept, a row
deleted meanwhile is not counted; on PostgreSQL, a row another connection holds keeps its update and rows
are locked only while their batch is written."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter

import pytest
from django.db import connection, connections

from chat.backfill import table as backfill_table
from chat.models import ChatLog
from finance.libpq import libpq_params
from tests.chat.backfill_support import _id, _old, _run, _typed

on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="row locks and a second connection need PostgreSQL (SQLite locks the whole database; set DATABASE_URL)",
)


# --- concurrent writers ------------------------------------------------------------


@pytest.mark.django_db
def test_a_write_between_scan_and_lock_is_kept(monkeypatch):
    """Another writer commits after the scan read the row: the batch decides on the new value."""
    _old(1, "silvia://analysis")
    newer = [
        {"source": "silvia://analysis", "title": "edited", "cited_text": "c0"},
        {"source": "silvia://your-portfolio", "title": "added", "cited_text": "c9"},
    ]
    original = backfill_table.BackfillTable.lock_and_read

    def write_then_lock(self, ids):
        ChatLog.objects.filter(pk=_id(1)).update(citations=newer)
        return original(self, ids)

    monkeypatch.setattr(backfill_table.BackfillTable, "lock_and_read", write_then_lock)
    report = _run()

    log = ChatLog.objects.get(pk=_id(1))
    assert log.citations == [
        {**newer[0], "target": {"kind": "analysis"}},
        {**newer[1], "target": {"kind": "portfolio"}},
    ]
    assert report.typed == Counter({"analysis": 2, "portfolio": 1})


@pytest.mark.django_db
def test_a_row_deleted_between_scan_and_lock_is_not_counted(monkeypatch):
    _old(1, "silvia://analysis")
    _old(2, "silvia://analysis")
    original = backfill_table.BackfillTable.lock_and_read

    def delete_then_lock(self, ids):
        ChatLog.objects.filter(pk=_id(1)).delete()
        return original(self, ids)

    monkeypatch.setattr(backfill_table.BackfillTable, "lock_and_read", delete_then_lock)
    report = _run()

    assert (report.rows_scanned, report.rows_changed) == (2, 1)
    assert _typed(_id(2)) == 1


def _other_connection():
    import psycopg

    params = libpq_params(connections["default"].settings_dict)
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(**params)


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_a_row_held_by_another_connection_keeps_its_update():
    """The batch waits for the row lock, then types what the other writer committed."""
    _old(1, "silvia://analysis")
    _old(2, "silvia://your-portfolio")
    edited = [{"source": "silvia://analysis", "title": "edited by the other writer", "cited_text": "c0"}]
    outcome: dict = {}

    def backfill_in_thread():
        try:
            outcome["report"] = _run()
        except BaseException as error:  # reported by the test below
            outcome["error"] = error
        finally:
            connections.close_all()

    with _other_connection() as other:
        other.execute("UPDATE ai_chat_logs SET citations = %s::jsonb WHERE id = %s", [json.dumps(edited), _id(1)])
        thread = threading.Thread(target=backfill_in_thread)
        thread.start()
        # Wait until the backfill is blocked on our row lock.
        deadline = time.monotonic() + 10
        while True:
            # Activity is snapshotted per transaction, and ours stays open.
            other.execute("SELECT pg_stat_clear_snapshot()")
            waiting = other.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query ILIKE '%FOR UPDATE%'"
            ).fetchone()[0]
            if waiting or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert waiting, "the backfill never waited for the row lock"
        other.commit()
    thread.join(10)

    assert "error" not in outcome, outcome.get("error")
    log = ChatLog.objects.get(pk=_id(1))
    assert log.citations == [{**edited[0], "target": {"kind": "analysis"}}]
    assert log.inline_citations[0]["target"] == {"kind": "analysis"}
    assert outcome["report"].rows_changed == 2


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_rows_are_locked_only_while_their_batch_is_written():
    """Between batches no lock is held: another connection updates a finished row at once."""
    for n in range(1, 5):
        _old(n, "silvia://analysis")
    updated = []

    def try_update(report):
        with _other_connection() as other:
            # A held lock would make this UPDATE fail with LockNotAvailable
            # after 1 s instead of waiting: the failure is the assertion.
            other.execute("SET lock_timeout = '1s'")
            other.execute("UPDATE ai_chat_logs SET response = 'x' WHERE id = %s", [uuid.UUID(report.last_id)])
            updated.append(report.last_id)

    _run(batch_size=2, on_batch=try_update)

    assert len(updated) == 2
    assert ChatLog.objects.filter(response="x").count() == 2
