"""`chat.backfill.backfill_citation_targets` on real rows, SQLite and PostgreSQL (docs/backfill.md): the golden
cases through the database, a mixed table by hand, the admin's counts after it; plus the pure list helper it
applies to each column (`citations.backfill.backfill_citation_list`)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from django.db import connection
from hypothesis import given
from hypothesis import strategies as st

from chat.backfill import MalformedRow
from chat.models import ChatLog
from citations.backfill import backfill_citation_list
from tests.cases import case_ids, load_cases
from tests.chat.backfill_support import _counts, _id, _old, _run, _stored_text
from tests.factories import ChatLogFactory, ChatSessionFactory

CASES = load_cases("backfill.json")


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
