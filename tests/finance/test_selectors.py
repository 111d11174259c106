"""finance.selectors: the caller's accounts, one account by URL segment, the portfolio (SPEC 9, 14)."""

from __future__ import annotations

from decimal import Decimal

from django.contrib.auth.models import AnonymousUser

from finance.selectors import account_get_for_user, accounts_for_user, portfolio_for_user
from tests.finance_data import MAYA_IDS, SAM_IDS


def test_accounts_for_user_are_only_the_callers(finance_users):
    maya, sam = finance_users
    assert {a.source_account_id for a in accounts_for_user(user=maya)} == MAYA_IDS
    assert {a.source_account_id for a in accounts_for_user(user=sam)} == SAM_IDS
    assert list(accounts_for_user(user=AnonymousUser())) == []


def test_account_get_for_user_resolves_the_callers_account(finance_users):
    maya, _ = finance_users
    account = account_get_for_user(user=maya, segment="u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dK")
    assert account is not None and account.label == "Sapphire Preferred" and account.source == "plaid"
    # percent-encoded as encodeURIComponent may leave it (SPEC 9): the decoded candidate matches
    account = account_get_for_user(user=maya, segment="353c631c%2Ddfd4-4f37-9200-339d068739fa")
    assert account is not None and account.label == "Home mortgage"


def test_account_get_for_user_refuses_what_a_target_never_carries(finance_users):
    maya, sam = finance_users
    assert account_get_for_user(user=maya, segment="NPRVdD53X83RZJzzzzgEOzdmenCkhvMdgaKjI") is None  # sam's
    assert account_get_for_user(user=sam, segment="u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dK") is None  # maya's
    assert account_get_for_user(user=maya, segment="0x52908400098527886E0F7030069857D2E4169EE7") is None  # wallet
    assert account_get_for_user(user=maya, segment="eVBnqd8Qm1hNdKk6l9p3XwZr4yLJz7RgMxP2o") is None  # an item id
    assert account_get_for_user(user=AnonymousUser(), segment="u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dK") is None


def test_portfolio_totals_by_currency(finance_users, django_assert_num_queries):
    maya, _ = finance_users
    with django_assert_num_queries(2):  # accounts with connections, then holdings with securities
        portfolio = portfolio_for_user(user=maya)
        holdings = {a.name: [h.security.ticker for h in a.holdings.all()] for a in portfolio.accounts}
    assert holdings["Brokerage"] == ["VOO", "AAPL"]
    (usd,) = portfolio.totals
    # by hand: 4820.17 + 15000 + 2210.55 + 93976.82 + 37538.70 + 18530.35 + 485000 + 4180
    assert (usd.currency, usd.assets) == ("USD", Decimal("661256.59"))
    assert usd.liabilities == Decimal("315380.53")  # 2318.45 + 611.90 + 312450.18
    assert usd.net == Decimal("345876.06")
