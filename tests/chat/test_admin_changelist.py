"""The admin's changelists (issue #3): the kind, prompt-version and date filters and the search return the
exact set of rows on SQLite and on PostgreSQL (DATABASE_URL); the session admin; the changelist's query budget."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat.models import ChatLog
from citations.targets import TARGET_KINDS
from tests.chat.admin_support import ACCOUNT_A, ACCOUNT_B, ACCOUNT_C, LIST_URL, cite, listed, log_with
from tests.factories import ChatLogFactory, ChatSessionFactory

# -- filters and search: exact sets on both databases -----------------------------


@pytest.fixture
def kinds_rows(db):
    """One row per situation the kind filter must tell apart."""
    t0 = dt.datetime(2026, 11, 2, 12, tzinfo=dt.UTC)
    rows = {
        "web": log_with([cite("https://Example.org/Rates", {"kind": "web", "url": "https://example.org/rates"})]),
        "library": log_with(
            [
                cite("silvia://tax-authority/irs/p590a.md", {"kind": "tax_reference", "url": None}),
                cite("silvia://credit-card-corpus/chase/pricing.md", {"kind": "card_document", "url": None}),
                cite(
                    "https://www.ecfr.gov/current/title-12/part-1026",
                    {"kind": "mortgage_reference", "url": "https://www.ecfr.gov/current/title-12/part-1026"},
                ),
            ]
        ),
        "market": log_with(
            [
                cite("silvia://market-data/finnhub/AAPL", {"kind": "market_data", "ticker": "AAPL"}),
                cite("silvia://analysis", {"kind": "analysis"}),
            ]
        ),
        "account": log_with(
            [cite("silvia://your-account/checking", {"kind": "account", "accountId": ACCOUNT_C, "provider": "plaid"})]
        ),
        "accounts": log_with(
            [
                cite(
                    "silvia://your-account/credit-card",
                    {
                        "kind": "accounts",
                        "accounts": [
                            {"accountId": ACCOUNT_A, "provider": "plaid"},
                            {"accountId": ACCOUNT_B, "provider": None},
                        ],
                    },
                )
            ]
        ),
        # An untyped citation whose source spells "account": still only untyped.
        "portfolio_untyped": log_with(
            [cite("silvia://your-portfolio", {"kind": "portfolio"}), cite("silvia://your-account/accounts")]
        ),
        "malformed": log_with([cite("silvia://your-account/x", {"kind": "account"})], prompt_version="legacy"),
        # A kind met only in the inline citations (the filter covers both lists).
        "inline_only": log_with(
            [],
            [
                cite(
                    "silvia://your-account/savings",
                    {"kind": "account", "accountId": ACCOUNT_A, "provider": "manual"},
                    start=0,
                    end=1,
                )
            ],
        ),
        "none": log_with([], prompt_version="legacy"),
    }
    for n, log in enumerate(rows.values()):
        ChatLog.objects.filter(pk=log.pk).update(created_at=t0 + dt.timedelta(days=n))
    return {name: log.pk for name, log in rows.items()}


KIND_EXPECTED = {
    "web": {"web"},
    "tax_reference": {"library"},
    "card_document": {"library"},
    "mortgage_reference": {"library"},
    "market_data": {"market"},
    "analysis": {"market"},
    "account": {"account", "inline_only"},
    "accounts": {"accounts"},
    "portfolio": {"portfolio_untyped"},
    "untyped": {"portfolio_untyped"},
    "malformed": {"malformed"},
}


def test_kind_filter_offers_every_kind():
    assert set(KIND_EXPECTED) == {*TARGET_KINDS, "untyped", "malformed"}


@pytest.mark.django_db
@pytest.mark.parametrize("kind", sorted(KIND_EXPECTED))
def test_kind_filter_returns_exactly_the_rows_with_that_kind(staff_client, kinds_rows, kind):
    response = staff_client.get(LIST_URL, {"target_kind": kind})
    assert listed(response) == {kinds_rows[name] for name in KIND_EXPECTED[kind]}


@pytest.mark.django_db
def test_unknown_kind_returns_nothing_and_no_filter_returns_everything(staff_client, kinds_rows):
    assert listed(staff_client.get(LIST_URL, {"target_kind": "weather"})) == set()
    assert listed(staff_client.get(LIST_URL)) == set(kinds_rows.values())


@pytest.mark.django_db
def test_prompt_version_filter(staff_client, kinds_rows):
    legacy = {kinds_rows["malformed"], kinds_rows["none"]}
    assert listed(staff_client.get(LIST_URL, {"prompt_version__exact": "legacy"})) == legacy
    assert listed(staff_client.get(LIST_URL, {"prompt_version__exact": "v5"})) == set(kinds_rows.values()) - legacy


@pytest.mark.django_db
def test_date_filter(staff_client, kinds_rows):
    # The rows are one a day from 2026-11-02 12:00 UTC, in `kinds_rows` order.
    # The parameters are those the filter's own links carry (aware datetimes).
    response = staff_client.get(
        LIST_URL, {"created_at__gte": "2026-11-03 00:00:00+00:00", "created_at__lt": "2026-11-05 00:00:00+00:00"}
    )
    assert listed(response) == {kinds_rows["library"], kinds_rows["market"]}


@pytest.mark.django_db
def test_filters_combine(staff_client, kinds_rows):
    response = staff_client.get(LIST_URL, {"target_kind": "malformed", "prompt_version__exact": "v5"})
    assert listed(response) == set()
    response = staff_client.get(LIST_URL, {"target_kind": "account", "q": ACCOUNT_A})
    assert listed(response) == {kinds_rows["inline_only"]}


@pytest.mark.django_db
def test_facet_counts_render(staff_client, kinds_rows):
    response = staff_client.get(LIST_URL, {"_facets": "1"})
    assert response.status_code == 200
    assert "untyped (1)" in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("term", "expected"),
    [
        (ACCOUNT_A, {"accounts", "inline_only"}),
        (ACCOUNT_C, {"account"}),
        # Account ids are case-sensitive: a case variant is another id, on SQLite too.
        (ACCOUNT_A.swapcase(), set()),
        (ACCOUNT_A.lower(), set()),
        (ACCOUNT_A[:-1], set()),  # exact: a prefix is not the id
        ("|", set()),
        # Sources: substring, any case.
        ("example.ORG/rates", {"web"}),
        ("silvia://your-account/", {"account", "accounts", "portfolio_untyped", "malformed", "inline_only"}),
        ("finnhub/AAPL", {"market"}),
        ("100%", set()),  # LIKE wildcards are matched literally
        ("tax_authority", set()),
        # Words are ANDed.
        ("your-portfolio silvia://your-account/accounts", {"portfolio_untyped"}),
        ("", set()),  # handled below: an empty search lists everything
    ],
)
def test_search_by_source_and_exact_account_id(staff_client, kinds_rows, term, expected):
    response = staff_client.get(LIST_URL, {"q": term})
    if term == "":
        expected = set(kinds_rows)
    assert listed(response) == {kinds_rows[name] for name in expected}


@pytest.mark.django_db
def test_search_by_log_id_session_id_and_username(staff_client, kinds_rows):
    log = ChatLog.objects.select_related("session", "user").get(pk=kinds_rows["web"])
    assert listed(staff_client.get(LIST_URL, {"q": str(log.pk)})) == {log.pk}
    assert listed(staff_client.get(LIST_URL, {"q": str(log.session_id)})) == {log.pk}
    assert listed(staff_client.get(LIST_URL, {"q": log.user.username})) == {log.pk}
    assert listed(staff_client.get(LIST_URL, {"q": log.user.username.upper()})) == set()
    # An id has one spelling (citations.uuids.parse_uuid): upper case is it, braces or no dashes are not.
    assert listed(staff_client.get(LIST_URL, {"q": str(log.pk).upper()})) == {log.pk}
    assert listed(staff_client.get(LIST_URL, {"q": log.pk.hex})) == set()
    assert listed(staff_client.get(LIST_URL, {"q": f"{{{log.pk}}}"})) == set()


@pytest.mark.django_db
def test_session_admin_lists_searches_and_links_to_its_turns(staff_client):
    session = ChatSessionFactory.create(title="Card balances")
    logs = [ChatLogFactory.create(session=session), ChatLogFactory.create(session=session)]
    other = ChatLogFactory.create()

    response = staff_client.get("/admin/chat/chatsession/", {"q": "card BAL"})
    assert {s.pk for s in response.context["cl"].result_list} == {session.pk}

    page = staff_client.get(f"/admin/chat/chatsession/{session.pk}/change/").content.decode()
    assert f"{LIST_URL}?session__exact={session.pk}" in page and "2 turn(s)" in page
    assert listed(staff_client.get(LIST_URL, {"session__exact": str(session.pk)})) == {log.pk for log in logs}
    assert other.pk not in listed(staff_client.get(LIST_URL, {"session__exact": str(session.pk)}))


# -- query budgets ------------------------------------------------------------------


@pytest.mark.django_db
def test_changelist_of_100_rows_runs_four_queries_and_loads_no_json(staff_client, django_assert_num_queries):
    for _ in range(120):
        ChatLogFactory.create()

    with CaptureQueriesContext(connection) as captured, django_assert_num_queries(4):
        # 1. the session row (django_session), 2. the staff user,
        # 3. COUNT(*) of the filtered rows for the paginator (no full count:
        #    show_full_result_count = False), 4. the page of 100 logs with
        #    their session and owner (one JOIN, list_select_related).
        response = staff_client.get(LIST_URL, {"target_kind": "portfolio", "q": "portfolio"})

    assert len(listed(response)) == 100
    page_sql = captured.captured_queries[-1]["sql"]
    selected = page_sql.split(' FROM "ai_chat_logs"')[0]  # the columns read, not those filtered on
    # The question column reads only a head of the message (SUBSTR, SUBSTRING on PostgreSQL).
    selected = re.sub(r'SUBSTR(ING)?\("ai_chat_logs"\."user_message"', "SUBSTR(", selected)
    assert "JOIN" in page_sql and '"chat_sessions"."title"' in selected
    # No column is selected whole; the counts read `citations` inside the
    # database (json_array_length, json_each / jsonb_path_query_array).
    for column in ("citations", "inline_citations", "response", "user_message"):
        assert not re.search(rf'(^SELECT |, )"ai_chat_logs"\."{column}"(,|$)', selected), column
    assert "json_array_length" in selected or "jsonb_array_length" in selected
