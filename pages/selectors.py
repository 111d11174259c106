"""Reads for the pages, always scoped to the caller."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.contrib.auth.models import AbstractBaseUser


def account_names_for_user(*, user: AbstractBaseUser) -> dict[str, str]:
    """The caller's account ids (as a target carries them) mapped to each account's name.

    Empty until the financial data app is installed.
    """
    if not apps.is_installed("finance"):
        return {}
    from finance.selectors import accounts_for_user

    return {account.target_account_id: account.name for account in accounts_for_user(user=user)}


def account_for_segment(*, user: AbstractBaseUser, segment: str) -> Any | None:
    """The caller's account an `/accounts/<segment>` path names (SPEC section 9), else None."""
    if not apps.is_installed("finance"):
        return None
    from finance.selectors import account_get_for_user

    return account_get_for_user(user=user, segment=segment)


def portfolio_of(*, user: AbstractBaseUser) -> Any | None:
    """The caller's portfolio (accounts, balances, holdings, totals), or None without financial data."""
    if not apps.is_installed("finance"):
        return None
    from finance.selectors import portfolio_for_user

    return portfolio_for_user(user=user)
