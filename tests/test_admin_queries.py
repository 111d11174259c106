"""Issue 12: the admin's counts, kind filter and search computed by the
database from the stored JSON, for rows however they were written; the
array check constraints; migration 0003 over legacy rows; admin query
strings that never 500. Runs on SQLite and on PostgreSQL (DATABASE_URL)."""

from __future__ import annotations

import importlib
import json
import random
import re
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from chat.admin.logs import CappedCountPaginator
from chat.backfill import backfill_citation_targets
from chat.citation_queries import SOURCES_TEXT_SQL, STATES, HasCitationState, NamesAccount, SourceContains
from chat.models import ChatLog, ChatSession
from chat.selectors import chat_logs_with_citation_counts
from chat.services import record_turn
from citations.summary import MALFORMED, UNTYPED, classify_citation
from citations.targets import AccountsTarget, AccountTarget
from tests.cases import load_cases
from tests.factories import ChatLogFactory, ChatSessionFactory, UserFactory

LIST_URL = "/admin/chat/chatlog/"
MIGRATION_0003 = importlib.import_module("chat.migrations.0003_admin_reads_json")
ACCOUNT_A = "FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U"
ACCOUNT_B = "qozD68xagSpdzNis02f1g3FwR8N8ZJXFRzj2c"
ACCOUNT_C = "ZtLFsthnkAxRzuUr1nu1CQAWtci7Jytl9ooyT"
COLUMNS = (
    "id, session_id, user_id, user_message, response, citations, inline_citations, prompt_version, model, created_at"
)


# -- the Python reference ---------------------------------------------------------


def reference_states(row: Any) -> set[str]:
    """Every `classify_citation` state met in either column."""
    return {classify_citation(entry)[0] for column in row for entry in column}


def reference_counts(citations: list) -> tuple[int, int, int, int]:
    states = [classify_citation(entry)[0] for entry in citations]
    untyped, malformed = states.count(UNTYPED), states.count(MALFORMED)
    return len(states), len(states) - untyped - malformed, untyped, malformed


def reference_account_ids(row: Any) -> set[str]:
    ids: set[str] = set()
    for column in row:
        for entry in column:
            target = classify_citation(entry)[1]
            if isinstance(target, AccountTarget):
                ids.add(target.account_id)
            elif isinstance(target, AccountsTarget):
                ids.update(ref.account_id for ref in target.accounts)
    return ids


def reference_sources(row: Any) -> list[str]:
    return [e["source"] for column in row for e in column if isinstance(e, dict) and isinstance(e.get("source"), str)]


def _db_counts(pk: Any) -> tuple[int, int, int, int]:
    row: Any = chat_logs_with_citation_counts().get(pk=pk)
    return row.citation_total, row.typed_total, row.untyped_total, row.malformed_total


# -- rows written four ways ---------------------------------------------------------


def _raw_insert(
    session: ChatSession, user: AbstractBaseUser, citations: Any, inline: Any, *, text: bool = False
) -> uuid.UUID:
    """INSERT by hand, as another writer would; `text=True` passes the JSON text as given."""
    pk = uuid.uuid4()
    db_pk = ChatLog._meta.pk.get_db_prep_value(pk, connection)
    db_session = ChatSession._meta.pk.get_db_prep_value(session.pk, connection)
    encode = (lambda v: v) if text else json.dumps
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO ai_chat_logs ({COLUMNS}) "
            f"VALUES (%s, %s, %s, 'raw', '', %s{cast}, %s{cast}, 'legacy', '', %s)",
            [db_pk, db_session, user.pk, encode(citations), encode(inline), "2026-11-20 10:00:00"],
        )
    return pk


def _golden_record() -> dict:
    """The first turn vector: two cards under one label (HAND below is computed from it)."""
    return load_cases("turns.json", shared=False)[0]["record"]


LEGACY: list[dict[str, Any]] = [
    {"source": "silvia://your-portfolio", "title": "Portfolio", "cited_text": "total"},
    {"source": "silvia://market-data/finnhub/AAPL", "title": "AAPL", "cited_text": "up"},
    {"source": "silvia://your-account/checking", "title": "Checking", "cited_text": "balance"},
    {"source": "silvia://tax-authority/irs/impôt.md", "title": "Impôt", "cited_text": "x", "target": None},
]


@pytest.fixture
def four_ways(db) -> dict[str, uuid.UUID]:
    """The same turn by `record_turn`, the ORM and raw SQL, and a legacy raw-SQL row after the backfill."""
    UserFactory.create(username="maya")
    by_service = record_turn(_golden_record())
    session, user = by_service.session, by_service.user
    by_orm = ChatLog.objects.create(
        session=session,
        user=user,
        user_message="orm",
        citations=by_service.citations,
        inline_citations=by_service.inline_citations,
        prompt_version="v5",
    )
    by_sql = _raw_insert(session, user, by_service.citations, by_service.inline_citations)
    legacy = _raw_insert(session, user, LEGACY, [{**c, "start": 0, "end": 1} for c in LEGACY])
    report = backfill_citation_targets(model=ChatLog)
    assert report.rows_changed == 1  # only the legacy row needed targets
    return {"record_turn": by_service.pk, "orm": by_orm.pk, "raw_sql": by_sql, "backfill": legacy}


# Hand-computed from the golden case and LEGACY: (counts over citations,
# kinds in either column, account ids, a source spelled otherwise).
HAND = {
    "service": ((2, 2, 0, 0), {"accounts", "account"}, {ACCOUNT_A, ACCOUNT_B, ACCOUNT_C}, "YOUR-ACCOUNT/CREDIT"),
    "backfill": ((4, 2, 1, 1), {"portfolio", "market_data", UNTYPED, MALFORMED}, set(), "IRS/IMPÔT"),
}


@pytest.mark.parametrize("way", ["record_turn", "orm", "raw_sql", "backfill"])
def test_every_row_is_counted_filtered_and_searched_whoever_wrote_it(four_ways, way, staff_client):
    pk = four_ways[way]
    counts, kinds, ids, source_word = HAND["backfill" if way == "backfill" else "service"]
    stored = ChatLog.objects.get(pk=pk)
    assert kinds == reference_states(
        (stored.citations, stored.inline_citations)
    )  # the hand figures are the reference's
    assert _db_counts(pk) == counts == reference_counts(stored.citations)

    for state in STATES:
        found = pk in listed(staff_client.get(LIST_URL, {"target_kind": state}))
        assert found == (state in kinds), state
    for account_id in ids:
        assert pk in listed(staff_client.get(LIST_URL, {"q": account_id}))
        assert pk not in listed(staff_client.get(LIST_URL, {"q": account_id.lower()}))
    assert pk in listed(staff_client.get(LIST_URL, {"q": source_word}))
    row = next(r for r in staff_client.get(LIST_URL, {"q": str(pk)}).context["cl"].result_list)
    assert (row.citation_total, row.typed_total, row.untyped_total, row.malformed_total) == counts


# -- a random table against the Python reference --------------------------------------

KINDS_FOR_RANDOM = [
    "web",
    "tax_reference",
    "card_document",
    "mortgage_reference",
    "market_data",
    "analysis",
    "account",
    "accounts",
    "portfolio",
    "weather",
]
IDS = [ACCOUNT_A, ACCOUNT_B, ACCOUNT_C, "", "short", "ÄccountÜnicode-000000"]
ODD_VALUES = [None, True, 0, 1.5, "", "x", [], ["x"], {}, {"a": 1}]


def _random_target(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.08:
        return rng.choice(ODD_VALUES)  # not a target at all
    kind: Any = rng.choice(KINDS_FOR_RANDOM) if rng.random() < 0.95 else rng.choice([None, 3, ["account"]])
    target: dict[str, Any] = {"kind": kind}
    for key in ("url", "ticker", "accountId", "provider"):
        if rng.random() < 0.6:
            target[key] = (
                rng.choice([*IDS, "https://example.org/ä", None, 7, ["u"]])
                if rng.random() < 0.85
                else rng.choice(ODD_VALUES)
            )
    if rng.random() < 0.6:
        refs: Any = [
            {"accountId": rng.choice(IDS), "provider": rng.choice(["plaid", None])}
            if rng.random() < 0.9
            else rng.choice(ODD_VALUES)
            for _ in range(rng.randint(0, 3))
        ]
        target["accounts"] = refs if rng.random() < 0.9 else rng.choice(ODD_VALUES)
    if rng.random() < 0.05:
        return [target]  # an array holding a target: malformed
    return target


def _random_entry(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.04:
        return rng.choice([None, 5, "entry", ["nested"], [{"target": {"kind": "analysis"}}]])
    entry: dict[str, Any] = {
        "source": rng.choice(
            ["silvia://your-portfolio", "silvia://tax-authority/irs/Impôt.md", "https://x.org/%_", 5, None]
        )
    }
    if roll > 0.25:
        entry["target"] = _random_target(rng)
    return entry


@pytest.fixture
def random_table(db) -> dict[Any, tuple[list, list]]:
    rng = random.Random(12)
    session: Any = ChatSessionFactory.create()
    rows = []
    for _ in range(2000):
        citations = [_random_entry(rng) for _ in range(rng.randint(0, 4))]
        inline = [_random_entry(rng) for _ in range(rng.randint(0, 3))]
        rows.append(
            ChatLog(
                session=session,
                user=session.user,
                user_message="q",
                citations=citations,
                inline_citations=inline,
                prompt_version="v5",
            )
        )
    ChatLog.objects.bulk_create(rows, batch_size=500)
    # Read back: jsonb drops duplicate keys and the reference must see what is stored.
    return {log.pk: (log.citations, log.inline_citations) for log in ChatLog.objects.all()}


def test_filters_counts_and_account_search_equal_the_python_reference_on_2000_random_rows(random_table):
    assert len(random_table) == 2000
    for state in STATES:
        expected = {pk for pk, row in random_table.items() if state in reference_states(row)}
        assert set(ChatLog.objects.filter(HasCitationState(state)).values_list("pk", flat=True)) == expected, state
        assert expected or state in ("account", "accounts")  # the table exercises the states
    totals = ("citation_total", "typed_total", "untyped_total", "malformed_total")
    counted = {pk: tuple(rest) for pk, *rest in chat_logs_with_citation_counts().values_list("pk", *totals)}
    assert counted == {pk: reference_counts(row[0]) for pk, row in random_table.items()}
    for account_id in [*IDS[:3], "ÄccountÜnicode-000000", ACCOUNT_A.lower()]:
        expected = {pk for pk, row in random_table.items() if account_id in reference_account_ids(row)}
        assert set(ChatLog.objects.filter(NamesAccount(account_id)).values_list("pk", flat=True)) == expected, (
            account_id
        )
    for term in ["IMPÔT", "%_", "portfolio", "Https://X", '"', "[", ","]:
        expected = {
            pk for pk, row in random_table.items() if any(term.lower() in s.lower() for s in reference_sources(row))
        }
        assert set(ChatLog.objects.filter(SourceContains(term)).values_list("pk", flat=True)) == expected, term


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


# -- query strings never 500 ----------------------------------------------------------


@pytest.fixture
def staff_client(db) -> Client:
    client = Client()
    staff: Any = UserFactory.create(username="admin", is_staff=True, is_superuser=True)
    client.force_login(staff)
    return client


def listed(response) -> set:
    assert response.status_code == 200, response.status_code
    return {log.pk for log in response.context["cl"].result_list}


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
