"""Reads of the user's financial data for pages (SPEC 9, 14): always scoped to the caller."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import Prefetch, QuerySet

from citations.accounts import account_ref_from_row
from citations.urls import account_id_candidates
from finance.models import Account, Holding


def accounts_for_user(*, user: Any) -> QuerySet[Account]:
    """The caller's accounts with their connection, ordered by name; empty for an anonymous user."""
    if not getattr(user, "is_authenticated", False):
        return Account.objects.none()
    return Account.objects.filter(user=user).select_related("connection").order_by("name", "id")


def account_target_id(account: Account) -> str | None:
    """The account id a citation target carries for `account`: what SPEC 3 reads from its view row, else None.

    A wallet (a source other than plaid/manual/snaptrade) names no account.
    """
    ref = account_ref_from_row({"source": account.source, "source_account_id": account.source_account_id})
    return ref.account_id if ref is not None else None


def account_get_for_user(*, user: Any, segment: str) -> Account | None:
    """The caller's account an `/accounts/<segment>` path means (SPEC 9), or None.

    Each of `account_id_candidates(segment)` is tried in order against the
    caller's own accounts only, matching the id a target would carry.
    """
    candidates = account_id_candidates(segment)
    found = {a.source_account_id: a for a in accounts_for_user(user=user).filter(source_account_id__in=candidates)}
    for candidate in candidates:
        account = found.get(candidate)
        if account is not None and account_target_id(account) == candidate:
            return account
    return None


@dataclass(frozen=True, slots=True)
class CurrencyTotal:
    """Totals in one currency: `assets` and `liabilities` (owed, positive) and `net` = assets − liabilities."""

    currency: str
    assets: Decimal
    liabilities: Decimal

    @property
    def net(self) -> Decimal:
        return self.assets - self.liabilities


@dataclass(frozen=True, slots=True)
class Portfolio:
    """The caller's accounts (holdings prefetched as `account.holdings.all()`) and totals by currency."""

    accounts: list[Account]
    totals: list[CurrencyTotal] = field(default_factory=list)


def portfolio_for_user(*, user: Any) -> Portfolio:
    """The caller's accounts with balances and holdings, and totals per currency (2 queries)."""
    holdings = Holding.objects.select_related("security").order_by("-institution_value", "id")
    accounts = list(accounts_for_user(user=user).prefetch_related(Prefetch("holdings", queryset=holdings)))
    assets: dict[str, Decimal] = defaultdict(Decimal)
    liabilities: dict[str, Decimal] = defaultdict(Decimal)
    for account in accounts:
        balance = account.current_balance or Decimal(0)
        (liabilities if account.is_liability else assets)[account.currency] += balance
    currencies = sorted(set(assets) | set(liabilities))
    totals = [CurrencyTotal(c, assets[c], liabilities[c]) for c in currencies]
    return Portfolio(accounts=accounts, totals=totals)
