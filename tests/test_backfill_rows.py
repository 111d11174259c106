"""`chat.backfill.backfill_citation_targets` on real rows, SQLite and PostgreSQL (docs/backfill.md).

Plus the pure list helper it applies to each column
(`citations.backfill.backfill_citation_list`).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter

import pytest
from django.db import connection, connections
from hypothesis import given
from hypothesis import strategies as st

from chat.backfill import BackfillReport, MalformedRow, backfill_citation_targets
from chat.backfill import table as backfill_table
from chat.models import ChatLog
from chat.selectors import chat_logs_with_citation_counts
from citations.backfill import backfill_citation_list
from tests.cases import case_ids, load_cases
from tests.factories import ChatLogFactory, ChatSessionFactory

CASES = load_cases("backfill.json")
on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="row locks and a second connection need PostgreSQL (SQLite locks the whole database; set DATABASE_URL)",
)


def _id(n: int) -> uuid.UUID:
    """Row ids in a known primary-key order."""
    return uuid.UUID(f"00000000-0000-4000-8000-{n:012d}")


def _stored_text(log_id, column: str = "citations") -> str:
    """The column exactly as the database holds it (jsonb's text form on PostgreSQL)."""
    cast = "::text" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {connection.ops.quote_name(column)}{cast} FROM ai_chat_logs WHERE id = %s",
            [ChatLog._meta.pk.get_db_prep_value(log_id, connection)],
        )
        return cursor.fetchone()[0]


def _set_raw(log_id, column: str, json_text: str) -> None:
    """Store JSON text the ORM would not write (a JSON null, say)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE ai_chat_logs SET {connection.ops.quote_name(column)} = %s WHERE id = %s",
            [json_text, ChatLog._meta.pk.get_db_prep_value(log_id, connection)],
        )


def _counts(log_id) -> tuple[int, int, int, int]:
    """(citations, typed, untyped, malformed) as the admin computes them from the stored JSON."""
    row = chat_logs_with_citation_counts().get(pk=log_id)
    return (row.citation_total, row.typed_total, row.untyped_total, row.malformed_total)


def _typed(log_id) -> int:
    return _counts(log_id)[1]


def _run(**kwargs) -> BackfillReport:
    return backfill_citation_targets(model=ChatLog, **kwargs)


def _old(n: int, *sources: str, **extra) -> ChatLog:
    """A row saved before targets existed: one untyped citation per source."""
    citations = [{"source": s, "title": f"t{i}", "cited_text": f"c{i}"} for i, s in enumerate(sources)]
    inline = [{**c, "start": 2 * i, "end": 2 * i + 1} for i, c in enumerate(citations)]
    return ChatLogFactory.create(id=_id(n), citations=citations, inline_citations=inline, **extra)


# --- the pure helper ---------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
sources = st.sampled_from(
    [
        "silvia://your-portfolio",
        "silvia://analysis",
        "silvia://market-data/finnhub/brk.b",
        "silvia://your-account/x",
        "https://a.example/",
        "silvia://tax-authority/p.md",
    ]
)
entries = st.dictionaries(
    st.sampled_from(["source", "title", "cited_text", "start", "target", "extra"]), json_scalars
) | st.fixed_dictionaries({"source": sources, "title": st.text(max_size=3)})


@given(st.lists(entries, max_size=6))
def test_list_helper_only_appends_targets_and_is_idempotent(value):
    snapshot = json.dumps(value)
    result = backfill_citation_list(value)

    assert result is not None  # a list of objects is never malformed
    assert json.dumps(value) == snapshot  # the input is not mutated
    assert len(result.value) == len(value)
    for before, after in zip(value, result.value, strict=True):
        if after is before:
            continue
        assert "target" not in before
        assert list(after) == [*before, "target"]  # same keys, same order, target last
        assert {k: v for k, v in after.items() if k != "target"} == before
    assert len(result.typed) + result.already_typed + result.left_untyped == len(value)
    again = backfill_citation_list(result.value)
    assert again is not None and not again.changed and again.value == result.value


@pytest.mark.parametrize(
    "value", [None, {}, {"source": "silvia://analysis"}, "[]", 3, [{"source": "silvia://analysis"}, "x"], [None]]
)
def test_list_helper_refuses_what_is_not_a_list_of_objects(value):
    assert backfill_citation_list(value) is None


# --- the golden cases, through the database ----------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_case_through_the_database(case):
    citation = case["citation"]
    log = ChatLogFactory.create(citations=[citation], inline_citations=[{**citation, "start": 0, "end": 1}])
    before = {column: _stored_text(log.id, column) for column in ("citations", "inline_citations")}

    report = _run()

    log.refresh_from_db()
    if case["expect"] == "KEEP" or case["expect"] is None:
        # Byte for byte: the row was not even written.
        assert {column: _stored_text(log.id, column) for column in before} == before
        assert report.rows_changed == 0
        return
    expected_keys = [*citation, "target"]
    assert log.citations == [{**citation, "target": case["expect"]}]
    assert log.inline_citations == [{**citation, "start": 0, "end": 1, "target": case["expect"]}]
    if connection.vendor == "sqlite":  # jsonb keeps its own key order
        assert list(json.loads(_stored_text(log.id))[0]) == expected_keys
    assert report.rows_changed == 1
    assert _counts(log.pk)[:2] == (1, 1)  # the admin's count sees the new target


# --- a mixed table, by hand ---------------------------------------------------


@pytest.mark.django_db
def test_mixed_table_ends_exactly_as_expected():
    session = ChatSessionFactory.create()
    old = ChatLogFactory.create(
        id=_id(1),
        session=session,
        citations=[
            {"source": "silvia://your-portfolio", "title": "Your portfolio", "cited_text": "total: 1000"},
            {"source": "silvia://your-account/checking", "title": "Checking", "cited_text": "balance"},
            {
                "cited_text": "up 2%",
                "source": "silvia://market-data/finnhub/aapl",
                "title": None,
                "extra": [1, {"b": 2}],
            },
        ],
        inline_citations=[
            {
                "source": "silvia://your-portfolio",
                "title": "Your portfolio",
                "cited_text": "total: 1000",
                "start": 0,
                "end": 4,
            },
            {"source": "silvia://market-data/finnhub/aapl", "title": None, "cited_text": "up 2%", "start": 5, "end": 9},
            {
                "source": "silvia://your-portfolio",
                "title": "Your portfolio",
                "cited_text": "total: 1000",
                "start": 10,
                "end": 14,
                "target": {"kind": "nonsense"},
            },
        ],
    )
    typed = ChatLogFactory.create(id=_id(2), session=session)  # saved by the service: typed already
    web_only = _old(3, "https://www.irs.gov/publications/p590a", "silvia://search/search_web", session=session)
    half = ChatLogFactory.create(
        id=_id(4),
        session=session,
        citations=[
            {
                "source": "silvia://tax-authority/irs/p17.md",
                "title": "Pub 17",
                "cited_text": "x",
                "target": {"kind": "tax_reference", "url": None},
            }
        ],
        inline_citations=[
            {"source": "silvia://tax-authority/irs/p17.md", "title": "Pub 17", "cited_text": "x", "start": 0, "end": 1}
        ],
    )
    malformed = ChatLogFactory.create(
        id=_id(5),
        session=session,
        citations=[{"source": "silvia://analysis"}, 5],
        inline_citations=[{"source": "silvia://analysis"}],
    )
    untouched = {
        log.id: {c: _stored_text(log.id, c) for c in ("citations", "inline_citations")}
        for log in (typed, web_only, malformed)
    }

    report = _run(batch_size=2)

    old.refresh_from_db()
    assert old.citations == [
        {
            "source": "silvia://your-portfolio",
            "title": "Your portfolio",
            "cited_text": "total: 1000",
            "target": {"kind": "portfolio"},
        },
        {"source": "silvia://your-account/checking", "title": "Checking", "cited_text": "balance"},
        {
            "cited_text": "up 2%",
            "source": "silvia://market-data/finnhub/aapl",
            "title": None,
            "extra": [1, {"b": 2}],
            "target": {"kind": "market_data", "ticker": "AAPL"},
        },
    ]
    assert old.inline_citations == [
        {
            "source": "silvia://your-portfolio",
            "title": "Your portfolio",
            "cited_text": "total: 1000",
            "start": 0,
            "end": 4,
            "target": {"kind": "portfolio"},
        },
        {
            "source": "silvia://market-data/finnhub/aapl",
            "title": None,
            "cited_text": "up 2%",
            "start": 5,
            "end": 9,
            "target": {"kind": "market_data", "ticker": "AAPL"},
        },
        {
            "source": "silvia://your-portfolio",
            "title": "Your portfolio",
            "cited_text": "total: 1000",
            "start": 10,
            "end": 14,
            "target": {"kind": "nonsense"},
        },
    ]
    assert _counts(old.pk) == (3, 2, 1, 0)
    half.refresh_from_db()
    assert half.citations == [
        {
            "source": "silvia://tax-authority/irs/p17.md",
            "title": "Pub 17",
            "cited_text": "x",
            "target": {"kind": "tax_reference", "url": None},
        }
    ]
    assert half.inline_citations == [
        {
            "source": "silvia://tax-authority/irs/p17.md",
            "title": "Pub 17",
            "cited_text": "x",
            "start": 0,
            "end": 1,
            "target": {"kind": "tax_reference", "url": None},
        }
    ]
    assert _counts(half.pk) == (1, 1, 0, 0)
    for log_id, columns in untouched.items():
        assert {c: _stored_text(log_id, c) for c in columns} == columns
    # Nothing but the JSON moved.
    for log in (old, half):
        fresh = ChatLog.objects.get(pk=log.pk)
        assert (fresh.user_message, fresh.response, fresh.model, fresh.created_at, fresh.session_id) == (
            log.user_message,
            log.response,
            log.model,
            log.created_at,
            log.session_id,
        )

    assert (report.rows_scanned, report.rows_changed, report.batches, report.finished) == (5, 2, 3, True)
    assert report.typed == Counter({"portfolio": 2, "market_data": 2, "tax_reference": 1})
    # already typed: old's nonsense target, typed's 2 entries, half's citation
    assert (report.already_typed, report.left_untyped) == (4, 5)
    assert report.malformed == [MalformedRow(str(_id(5)), "citations holds a non-object")]
    assert report.last_id == str(_id(5))


@pytest.mark.django_db
def test_admin_counts_follow_the_json_the_backfill_writes():
    log = _old(1, "silvia://analysis", "silvia://your-account/x")
    assert _counts(log.pk) == (2, 0, 2, 0)

    _run()

    assert _counts(log.pk) == (2, 1, 1, 0)


# --- bad rows -------------------------------------------------------------------


@pytest.mark.django_db
def test_malformed_rows_are_reported_and_untouched():
    rows = {
        # Only lists: the check constraints refuse a column that is not an
        # array (tests/test_admin_queries.py).
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

    params = connections["default"].get_connection_params()
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
