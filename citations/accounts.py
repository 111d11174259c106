"""Account ids from SQL rows (docs/accounts.md).

Only the id columns named in `ACCOUNT_ID_COLUMNS` (and `source`, for the
provider) are ever read from a row: rows are the user's own and may hold
tokens, item ids or `clerk_id`, which never become targets (docs/privacy.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeGuard

from citations.targets import AccountRef, Provider, is_provider

__all__ = ["ACCOUNT_ID_COLUMNS", "account_ref_from_row", "is_account_id"]

# `fullmatch` anchors both ends, so unlike `$` a trailing newline cannot slip
# through. The negative look-ahead rejects all-digit values (row numbers).
_ACCOUNT_ID = re.compile(r"(?![0-9]+\Z)[A-Za-z0-9_-]{16,128}")

ACCOUNT_ID_COLUMNS: tuple[str, ...] = (
    "source_account_id",
    "snaptrade_account_id",
    "manual_account_uuid",
    "account_uuid",
    "account_id",
)
"""The row columns that may name an account, in the order they are tried."""

# Steps 2 and 3 of docs/accounts.md: column -> the provider it implies.
_FALLBACK_COLUMNS: tuple[tuple[str, Provider | None], ...] = (
    ("snaptrade_account_id", "snaptrade"),
    ("manual_account_uuid", "manual"),
    ("account_uuid", "manual"),
    ("account_id", None),
)


def is_account_id(value: object) -> TypeGuard[str]:
    """Whether `value` can be an account id (docs/accounts.md).

    True only for a `str` of 16 to 128 characters, each an ASCII letter,
    digit, `-` or `_`, that is not all digits. The whole string must match
    (a trailing newline is rejected). Never raises.
    """
    return isinstance(value, str) and _ACCOUNT_ID.fullmatch(value) is not None


def account_ref_from_row(row: object) -> AccountRef | None:
    """The account a SQL row names, or `None` (docs/accounts.md).

    Tried in order, a key that is absent or holds no valid id passing to the
    next:

    1. `source_account_id`; provider from `source` when it is exactly
       `plaid`, `manual` or `snaptrade`, `None` when `source` is absent or
       null. Any other `source` means the row names no account: `None`, and
       the later columns are not consulted.
    2. `snaptrade_account_id` (provider `snaptrade`), then
       `manual_account_uuid`, then `account_uuid` (provider `manual`).
    3. `account_id` (provider `None`).

    No other column is read. A `row` that is not a mapping gives `None`;
    never raises.
    """
    if not isinstance(row, Mapping):
        return None
    value = row.get("source_account_id")
    if is_account_id(value):
        source = row.get("source")
        if source is None:
            return AccountRef(value, None)
        # is_provider checks the type first: an unhashable `source` would make `in` raise.
        if is_provider(source):
            return AccountRef(value, source)
        return None
    for column, provider in _FALLBACK_COLUMNS:
        value = row.get(column)
        if is_account_id(value):
            return AccountRef(value, provider)
    return None
