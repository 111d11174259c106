"""Issue 12: the admin's database queries at their edges: the array check constraints, admin query strings
that never 500, search beyond ASCII and over JSON however escaped, the PostgreSQL indexes (the trigram
expression is the search's), migration 0003 over legacy rows, the capped count. Runs on SQLite and on
PostgreSQL (DATABASE_URL)."""

from __future__ import annotations

import importlib
import json
import re
import uuid
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from chat.admin.logs import CappedCountPaginator
from chat.citation_queries import SOURCES_TEXT_SQL, HasCitationState, NamesAccount, SourceContains
from chat.models import ChatLog, ChatSession
from citations.summary import UNTYPED
from tests.chat.admin_queries_support import COLUMNS, LEGACY, _db_counts, _raw_insert, reference_counts
from tests.chat.admin_support import ACCOUNT_A, LIST_URL, listed
from tests.factories import ChatLogFactory, ChatSessionFactory

MIGRATION_0003 = importlib.import_module("chat.migrations.0003_admin_reads_json")


# -- constraints ------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("value", ['"[]"', "null", '{"source": "s"}', "5"])
def test_the_database_refuses_a_column_that_is_not_an_array(value):
    log: Any = ChatLogFactory.create()
    for column in ("citations", "inline_citations"):
        with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
            cast = "::jsonb" if connection.vendor == "postgresql" else ""
            cursor.execute(
                f"UPDATE ai_chat_logs SET {column} = %s{cast} WHERE id = %s",
                [value, ChatLog._meta.pk.get_db_prep_value(log.pk, connection)],
            )
    with pytest.raises(IntegrityError), transaction.atomic():
        ChatLogFactory.create(citations="[]")  # a double-encoded list through the ORM


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query",
    [
        {"user_message__regex": "("},
        {"sources__range": "x"},
        {"citations__contains": "x"},
        {"citations__has_key": "x"},
        {"no_such_field": "1"},
        {"created_at__gte": "yesterday"},
        {"prompt_version__exact": "v5", "id__in": "x,y"},
        {"o": "99.x"},
        {"p": "x"},
        {"target_kind": "'; DROP TABLE ai_chat_logs; --"},
    ],
)
def test_admin_query_strings_never_500(staff_client, query):
    ChatLogFactory.create()
    response = staff_client.get(LIST_URL, query)
    # Django's own handling of a bad filter: a redirect to ?e=1, or 400 for a disallowed lookup.
    assert response.status_code in (200, 302, 400), response.status_code
    if response.status_code == 302:
        assert response["Location"].endswith("?e=1")
        assert staff_client.get(response["Location"]).status_code == 200


# -- non-ASCII source search ----------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("term", "found"), [("IMPÔT", True), ("impôt", True), ("IMPOT", False), ("ÉTÉ", True), ("straße", True)]
)
def test_source_search_ignores_case_beyond_ascii(staff_client, term, found):
    log: Any = ChatLogFactory.create(
        citations=[{"source": "silvia://tax-authority/fr/Impôt-Été-Straße.md"}], inline_citations=[]
    )
    assert (log.pk in listed(staff_client.get(LIST_URL, {"q": term}))) is found


def test_the_trigram_index_expression_is_the_one_the_search_uses():
    assert (
        SOURCES_TEXT_SQL.format(citations="citations", inline_citations="inline_citations")
        == MIGRATION_0003.SOURCES_TEXT
    )


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the GIN and trigram indexes are PostgreSQL's")
@pytest.mark.django_db
def test_postgresql_answers_kind_account_and_source_with_the_indexes():
    ChatLogFactory.create()
    queries = {
        "ai_chat_logs_citations_gin": ChatLog.objects.filter(HasCitationState("account")),
        "ai_chat_logs_inline_gin": ChatLog.objects.filter(NamesAccount(ACCOUNT_A)),
        "ai_chat_logs_sources_trgm": ChatLog.objects.filter(SourceContains("impôt")),
    }
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        for index, queryset in queries.items():
            assert index in queryset.explain(), index


# -- migration 0003 over legacy rows -------------------------------------------------------


def _migrate(target: tuple[str, str]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target])


@pytest.mark.django_db(transaction=True)
def test_migration_0003_runs_forward_over_legacy_rows_and_refuses_rows_that_are_not_arrays():
    session: Any = ChatSessionFactory.create()
    _migrate(("chat", "0002_backfill_citation_targets"))
    try:
        summary_columns = (
            "citation_count, typed_count, untyped_count, malformed_count, target_kinds, account_ids, sources"
        )
        pks = []
        for citations, stale in ((LEGACY, "0, 0, 0, 0, '', '', ''"), ('"[]"', "0, 0, 0, 0, '', '', ''")):
            pk = uuid.uuid4()
            pks.append(pk)
            with connection.cursor() as cursor:
                cursor.execute(
                    f"INSERT INTO ai_chat_logs ({COLUMNS}, {summary_columns}) "
                    f"VALUES (%s, %s, %s, 'legacy', '', %s, '[]', 'legacy', '', %s, {stale})",
                    [
                        ChatLog._meta.pk.get_db_prep_value(pk, connection),
                        ChatSession._meta.pk.get_db_prep_value(session.pk, connection),
                        session.user_id,
                        json.dumps(citations) if isinstance(citations, list) else citations,
                        "2026-01-01 00:00:00",
                    ],
                )
        legacy, double_encoded = pks

        with pytest.raises(MIGRATION_0003.NotArrayRows) as refused:
            _migrate(("chat", "0003_admin_reads_json"))
        assert "1 row(s) hold a citation column that is not a JSON array" in str(refused.value)
        assert f"  {double_encoded}: citations is string" in str(refused.value).splitlines()
        assert str(legacy) not in str(refused.value)

        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE ai_chat_logs SET citations = '[]' WHERE id = %s",
                [ChatLog._meta.pk.get_db_prep_value(double_encoded, connection)],
            )
        _migrate(("chat", "0003_admin_reads_json"))
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())

    # The legacy row, never touched by a writer since, is counted and found.
    assert _db_counts(legacy) == reference_counts(LEGACY) == (4, 0, 3, 1)
    assert set(ChatLog.objects.filter(HasCitationState(UNTYPED)).values_list("pk", flat=True)) == {legacy}
    assert set(ChatLog.objects.filter(SourceContains("IMPÔT")).values_list("pk", flat=True)) == {legacy}


# -- the capped count ------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(("rows", "shown"), [(3, "3 chat logs"), (4, "more than 3 chat logs")])
def test_the_list_counts_up_to_the_cap_and_then_says_more_than(staff_client, monkeypatch, rows, shown):
    monkeypatch.setattr(CappedCountPaginator, "cap", 3)
    for _ in range(rows):
        ChatLogFactory.create()
    response = staff_client.get(LIST_URL, {"target_kind": "portfolio"})
    assert len(listed(response)) == rows
    page = response.content.decode()
    assert re.search(rf"\s{shown}\s", page)
    assert ("more than 3 chat logs" in page) is (rows > 3)
    searched = staff_client.get(LIST_URL, {"q": "portfolio"}).content.decode()
    assert ("more than 3 results" in searched) is (rows > 3)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "term", ["\x00", "a\x00b", "\\", '"', "'", "%", "_", "😀", "$[*]", "x" * 5000, "\\u0000", "$.a ? (@ == 1)"]
)
def test_any_search_word_answers_without_error(staff_client, term):
    log: Any = ChatLogFactory.create(citations=[{"source": "silvia://your-portfolio", "target": {"kind": "portfolio"}}])
    response = staff_client.get(LIST_URL, {"q": f"{term} portfolio"})
    if "\x00" in term:
        assert response.status_code == 400  # Django refuses a NUL in the search box
        return
    assert listed(response) == set()  # no source holds the odd word
    assert log.pk in listed(staff_client.get(LIST_URL, {"q": "portfolio"}))


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("term", "found"), [("KELVIN", True), ("a/b", True), ("IMPÔT", True), ("IdX", False), ("idX", True), ("zzz", False)]
)
def test_search_finds_json_spelled_by_hand_however_escaped(term, found):
    # Raw JSON text as another writer may spell it: non-ASCII unescaped, a
    # Kelvin sign (lowercases to "k"), an escaped slash, an escaped id letter.
    session: Any = ChatSessionFactory.create()
    text = '[{"source": "\u212aelvin imp\u00f4t a\\/b", "target": {"kind": "account", "accountId": "id\\u0058"}}]'
    pk = _raw_insert(session, session.user, text, "[]", text=True)
    matches = ChatLog.objects.filter(SourceContains(term) | NamesAccount(term))
    assert (pk in set(matches.values_list("pk", flat=True))) is found


@pytest.mark.django_db
def test_a_kind_spelled_with_json_escapes_is_still_that_kind():
    session: Any = ChatSessionFactory.create()
    text = '[{"source": "s", "target": {"kind": "acc\\u006funt", "accountId": "x"}}]'
    pk = _raw_insert(session, session.user, text, "[]", text=True)
    assert set(ChatLog.objects.filter(HasCitationState("account")).values_list("pk", flat=True)) == {pk}
    assert not ChatLog.objects.filter(HasCitationState("portfolio")).exists()
