"""Reads for the pages, always scoped to the caller (docs/privacy.md and docs/pages.md)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser

from finance.selectors import account_target_id, accounts_for_user


def account_names_for_user(*, user: AbstractBaseUser) -> dict[str, str]:
    """The caller's account ids, as a target carries them, mapped to each account's readable name.

    Accounts that no target can name (a crypto wallet) are left out. One query.
    """
    names = {}
    for account in accounts_for_user(user=user):
        target_id = account_target_id(account)
        if target_id is not None:
            names[target_id] = account.label
    return names
