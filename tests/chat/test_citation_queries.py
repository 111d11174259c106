"""The support status of inline citations asked of the database (SPEC 15, docs/admin.md): `HasSupportStatus` and
`SupportCounts` equal the Python reader (`citations.support.support_status`) on 2,000 random rows of odd JSON and on
rows written by `record_turn`, the ORM and raw SQL (JSON text as another writer would spell it). Runs on SQLite and
on PostgreSQL (DATABASE_URL)."""

from __future__ import annotations

import importlib
import json
import random
from typing import Any

import pytest
from django.db import connection

from chat.citation_queries import SUPPORT_CHOICES, HasSupportStatus, jsonpath_support_any, postgresql_support_prefilter
from chat.models import ChatLog
from chat.selectors import chat_logs_with_support_counts
from chat.services import record_turn
from citations.support import SUPPORT_STATUSES, UNCHECKED, support_status
from tests.chat.admin_queries_support import _raw_insert
from tests.factories import ChatSessionFactory
from tests.support_turns import CASES

pytestmark = pytest.mark.django_db

DIGEST = "sha256:" + "0123456789abcdef" * 4
ODD = [None, True, 0, 1.5, "", "x", [], ["x"], {}, {"a": 1}]


def _reference(inline: Any) -> dict[str, int]:
    statuses = [support_status(entry) for entry in inline]
    return {status: statuses.count(status) for status in SUPPORT_STATUSES}


def _random_figure(rng: random.Random) -> Any:
    if rng.random() < 0.1:
        return rng.choice(ODD)
    figure: dict[str, Any] = {}
    for key, good in (("text", "$3"), ("start", 4), ("end", 6)):
        if rng.random() < 0.9:
            figure[key] = good if rng.random() < 0.8 else rng.choice([*ODD, -1, 7, 2.0, "4"])
    return figure


def _random_support(rng: random.Random) -> Any:
    if rng.random() < 0.1:
        return rng.choice(ODD)
    support: dict[str, Any] = {}
    if rng.random() < 0.95:
        support["status"] = rng.choice([*SUPPORT_STATUSES, "Supported", "later", None, 1])
    if rng.random() < 0.9:
        support["unmatched"] = (
            [_random_figure(rng) for _ in range(rng.randint(0, 3))] if rng.random() < 0.9 else rng.choice(ODD)
        )
    if rng.random() < 0.9:
        support["digest"] = rng.choice([DIGEST, None, DIGEST.upper(), DIGEST[:-1], "md5:x", 5, DIGEST + "0"])
    return support


def _random_entry(rng: random.Random) -> Any:
    if rng.random() < 0.04:
        return rng.choice([None, 5, "entry", ["nested"], [{"support": {"status": "supported"}}]])
    entry: dict[str, Any] = {"source": "s", "cited_text": "c", "start": 0, "end": 1}
    if rng.random() < 0.8:
        entry["support"] = _random_support(rng)
    return entry


@pytest.fixture
def random_table() -> dict[Any, list]:
    rng = random.Random(35)
    session: Any = ChatSessionFactory.create()
    rows = [
        ChatLog(
            session=session,
            user=session.user,
            user_message="q",
            citations=[],
            inline_citations=[_random_entry(rng) for _ in range(rng.randint(0, 4))],
            prompt_version="v5",
        )
        for _ in range(2000)
    ]
    ChatLog.objects.bulk_create(rows, batch_size=500)
    # Read back: jsonb drops duplicate keys and the reference must see what is stored.
    return {log.pk: log.inline_citations for log in ChatLog.objects.all()}


def _db_counts() -> dict[Any, dict[str, int]]:
    return dict(chat_logs_with_support_counts().values_list("pk", "support_counts"))


def _check_against_the_reference(table: dict[Any, list]) -> None:
    for choice, statuses in SUPPORT_CHOICES.items():
        expected = {pk for pk, inline in table.items() if any(support_status(e) in statuses for e in inline)}
        assert set(ChatLog.objects.filter(HasSupportStatus(choice)).values_list("pk", flat=True)) == expected, choice
        assert expected, choice  # the table exercises every choice
    assert _db_counts() == {pk: _reference(inline) for pk, inline in table.items()}


def test_filter_and_counts_equal_the_python_reader_on_2000_random_rows(random_table):
    assert len(random_table) == 2000
    _check_against_the_reference(random_table)


def test_rows_written_by_the_service_the_orm_and_raw_sql_read_the_same(maya):
    logs = [record_turn(case["record"]) for case in CASES]
    session, user = logs[0].session, logs[0].user
    for log in logs:
        ChatLog.objects.create(
            session=session, user=user, user_message="orm", inline_citations=log.inline_citations, citations=[]
        )
        _raw_insert(session, user, [], log.inline_citations)
    # JSON text as other writers spell it: escapes, an integer written 5.0 (Python reads a float: unreadable).
    escaped = '[{"source": "s", "support": {"status": "\\u0075nsupported", "unmatched": [], "digest": null}}]'
    _raw_insert(session, user, "[]", escaped, text=True)
    float_offset = '[{"support": {"status": "partly_supported", "unmatched": [{"text": "3", "start": 5.0, "end": 6}]}}]'
    _raw_insert(session, user, "[]", float_offset, text=True)
    table = {log.pk: log.inline_citations for log in ChatLog.objects.all()}
    assert sorted(support_status(e) for e in json.loads(escaped) + json.loads(float_offset)) == [
        UNCHECKED,
        "unsupported",
    ]
    _check_against_the_reference(table)


MIGRATION_0011 = importlib.import_module("chat.migrations.0011_support_filter_indexes")
FLAGGED_PATH = '$[*] ? (@.support.status == "partly_supported" || @.support.status == "unsupported")'


def test_migration_0011_carries_each_indexed_choices_jsonpath_as_the_filter_asks_it():
    """Frozen in the migration, word for word the filter's: else the planner cannot use the index."""
    assert {
        choice: jsonpath_support_any(statuses) for choice, statuses in SUPPORT_CHOICES.items() if choice != UNCHECKED
    } == MIGRATION_0011.SUPPORT_PATHS
    assert MIGRATION_0011.SUPPORT_PATHS["flagged"] == FLAGGED_PATH
    assert postgresql_support_prefilter('"ai_chat_logs"."inline_citations"') % ("'p'",) == (
        """jsonb_path_exists("ai_chat_logs"."inline_citations", 'p'::jsonpath, '{}'::jsonb, true)"""
    )


@pytest.mark.skipif("connection.vendor != 'postgresql'")
@pytest.mark.parametrize("choice", sorted(MIGRATION_0011.SUPPORT_PATHS))
def test_a_filtered_list_page_reads_its_choices_partial_index_in_the_lists_order(maya, choice):
    """The admin's page query (`-created_at`, `-id`, 100 rows) for `?support=<choice>` is an index scan of
    `ai_chat_logs_support_<choice>` (migration 0011), with no sort: the first page reads 100 entries."""
    record_turn(CASES[0]["record"])
    page = ChatLog.objects.filter(HasSupportStatus(choice)).order_by("-created_at", "-id")[:100]
    sql, params = page.query.sql_with_params()
    assert params[0] == jsonpath_support_any(SUPPORT_CHOICES[choice])
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")  # a table of one row is read whole otherwise
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET enable_seqscan")
    assert f"Index Scan using ai_chat_logs_support_{choice} on ai_chat_logs" in plan, plan
    assert "Sort" not in plan, plan


def test_a_bad_choice_is_refused():
    with pytest.raises(ValueError, match="unknown support choice"):
        HasSupportStatus("fine")
