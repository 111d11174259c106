"""How a backfill run goes, SQLite and PostgreSQL (docs/backfill.md): bad rows reported and left untouched; a run
stopped or killed finished by the next; a second run, a dry run, `after`, an empty table; one statement a
batch."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from django.db import connection

from chat.backfill import MalformedRow
from chat.models import ChatLog
from chat.selectors import chat_logs_with_citation_counts
from tests.chat.backfill_support import _id, _old, _run, _stored_text, _typed
from tests.factories import ChatLogFactory


def _set_raw(log_id, column: str, json_text: str) -> None:
    """Store JSON text the ORM would not write (a JSON null, say)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE ai_chat_logs SET {connection.ops.quote_name(column)} = %s WHERE id = %s",
            [json_text, ChatLog._meta.pk.get_db_prep_value(log_id, connection)],
        )


# --- bad rows -------------------------------------------------------------------


@pytest.mark.django_db
def test_malformed_rows_are_reported_and_untouched():
    rows = {
        # Only lists: the check constraints refuse a column that is not an
        # array (tests/chat/test_admin_queries.py).
        _id(1): ("citations", "[null]", "citations holds a non-object"),
        _id(2): ("citations", '[[{"source": "silvia://analysis"}]]', "citations holds a non-object"),
        _id(3): (
            "citations",
            json.dumps([json.dumps({"source": "silvia://analysis"})]),
            "citations holds a non-object",
        ),
        _id(4): ("citations", '[{"source": "silvia://analysis"}, 7]', "citations holds a non-object"),
        # The other column typeable: the row is still skipped whole.
        _id(5): ("inline_citations", '["[]"]', "inline_citations holds a non-object"),
    }
    for n, (log_id, (column, text, _)) in enumerate(rows.items(), start=1):
        _old(n, "silvia://analysis")
        _set_raw(log_id, column, text)
    good = _old(9, "silvia://your-portfolio")
    before = {log_id: [_stored_text(log_id, c) for c in ("citations", "inline_citations")] for log_id in rows}

    report = _run(batch_size=2)

    assert report.malformed == [MalformedRow(str(log_id), reason) for log_id, (_, _, reason) in rows.items()]
    assert {log_id: [_stored_text(log_id, c) for c in ("citations", "inline_citations")] for log_id in rows} == before
    assert report.rows_scanned == 6 and report.rows_changed == 1 and report.finished
    good.refresh_from_db()
    assert good.citations[0]["target"] == {"kind": "portfolio"}


# --- stopping, resuming, repeating --------------------------------------------------


@pytest.mark.django_db
def test_a_run_stopped_after_one_batch_is_finished_by_the_next():
    for n in range(1, 6):
        _old(n, "silvia://analysis")

    first = _run(batch_size=2, max_batches=1)
    assert (first.rows_scanned, first.rows_changed, first.finished, first.last_id) == (2, 2, False, str(_id(2)))
    assert chat_logs_with_citation_counts().filter(typed_total=1).count() == 2

    second = _run(batch_size=2)
    assert (second.rows_scanned, second.rows_changed, second.finished) == (5, 3, True)
    assert second.already_typed == 4 and second.typed == Counter({"analysis": 6})
    assert chat_logs_with_citation_counts().filter(typed_total=1).count() == 5


@pytest.mark.django_db
def test_a_run_killed_from_its_progress_callback_resumes_after_the_last_id():
    for n in range(1, 6):
        _old(n, "silvia://your-portfolio")
    seen = []

    def kill(report):
        seen.append(report.last_id)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(batch_size=3, on_batch=kill)

    # The batch before the callback committed; the rows after it were not touched.
    assert seen == [str(_id(3))]
    assert [log.typed_total for log in chat_logs_with_citation_counts().order_by("id")] == [1, 1, 1, 0, 0]
    resumed = _run(batch_size=3, after=seen[0])
    assert (resumed.rows_scanned, resumed.rows_changed, resumed.finished) == (2, 2, True)
    assert [log.typed_total for log in chat_logs_with_citation_counts().order_by("id")] == [1, 1, 1, 1, 1]


@pytest.mark.django_db
def test_a_second_run_changes_nothing():
    for n in range(1, 4):
        _old(n, "silvia://analysis", "silvia://mortgage-code/cfr/12/1026.md", "https://example.org/")
    _run(batch_size=2)
    before = {
        log.id: [_stored_text(log.id, c) for c in ("citations", "inline_citations")] for log in ChatLog.objects.all()
    }

    again = _run(batch_size=2)

    assert again.rows_changed == 0 and again.typed_total == 0 and again.rows_scanned == 3
    assert {
        log.id: [_stored_text(log.id, c) for c in ("citations", "inline_citations")] for log in ChatLog.objects.all()
    } == before


@pytest.mark.django_db
def test_dry_run_counts_and_writes_nothing():
    _old(1, "silvia://analysis")
    before = _stored_text(_id(1))

    report = _run(dry_run=True)

    assert (report.dry_run, report.rows_changed, report.typed) == (True, 1, Counter({"analysis": 2}))
    assert _stored_text(_id(1)) == before


@pytest.mark.django_db
def test_after_starts_after_that_id_and_is_validated():
    for n in range(1, 4):
        _old(n, "silvia://analysis")

    report = _run(after=_id(2))

    assert (report.rows_scanned, report.rows_changed) == (1, 1)
    assert _typed(_id(1)) == 0
    with pytest.raises(ValueError, match="not a UUID"):
        _run(after="nope")
    with pytest.raises(ValueError, match="batch_size"):
        _run(batch_size=0)


@pytest.mark.django_db
def test_an_empty_table_is_one_empty_scan():
    report = _run()
    assert (report.rows_scanned, report.batches, report.finished, report.last_id) == (0, 0, True, None)


@pytest.mark.django_db
def test_each_batch_writes_its_changed_rows_in_one_statement(django_assert_num_queries):
    for n in range(1, 5):
        _old(n, "silvia://analysis")
    ChatLogFactory.create(id=_id(5))  # typed already: read, never locked nor written

    # Savepoints of transaction.atomic inside the test's transaction: 2 per
    # batch that writes. Batch 1 (rows 1-3): scan, lock+re-read, one UPDATE.
    # Batch 2 (rows 4-5): scan, lock+re-read of row 4, one UPDATE. End: no more rows (batch 2 was short).
    with django_assert_num_queries(2 * 3 + 2 * 2) as captured:
        _run(batch_size=3)
    updates = [q["sql"] for q in captured.captured_queries if q["sql"].lstrip().upper().startswith(("UPDATE", "WITH"))]
    assert len(updates) == 2
