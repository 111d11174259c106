"""Issue 12: the admin's counts, kind filter and search, computed by the database from the stored JSON,
equal the Python reference for one turn written four ways (service, ORM, raw SQL, legacy row + backfill)
and for 2000 random rows. Runs on SQLite and on PostgreSQL (DATABASE_URL)."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from chat.backfill import backfill_citation_targets
from chat.citation_queries import STATES, HasCitationState, NamesAccount, SourceContains
from chat.models import ChatLog
from chat.selectors import chat_logs_with_citation_counts
from chat.services import record_turn
from citations.summary import MALFORMED, UNTYPED
from tests.cases import load_cases
from tests.chat.admin_queries_support import (
    LEGACY,
    _db_counts,
    _raw_insert,
    reference_account_ids,
    reference_counts,
    reference_sources,
    reference_states,
)
from tests.chat.admin_support import ACCOUNT_A, ACCOUNT_B, ACCOUNT_C, LIST_URL, listed
from tests.factories import ChatSessionFactory, UserFactory


def _golden_record() -> dict:
    """The first turn vector: two cards under one label (HAND below is computed from it)."""
    return load_cases("turns.json", shared=False)[0]["record"]


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
