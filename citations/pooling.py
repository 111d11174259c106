"""Pooling account refs: the rule `execute_sql` groups (docs/citable.md) and the turn registry
(docs/registry.md) share."""

from __future__ import annotations

from collections.abc import Iterable

from citations.targets import AccountRef, AccountsTarget, AccountTarget, CitationTarget, Provider

__all__ = ["account_refs_of", "accounts_target", "merge_account_refs"]


def merge_account_refs(refs: Iterable[AccountRef]) -> tuple[AccountRef, ...]:
    """Pool account refs (docs/citable.md, docs/registry.md).

    First-seen order, one ref per account id. Where two refs share an id, a
    `None` provider gives way to a known one; between two known providers the
    first stays. Returns a tuple, empty when `refs` is empty.
    """
    providers: dict[str, Provider | None] = {}
    for ref in refs:
        if ref.account_id not in providers or (providers[ref.account_id] is None and ref.provider is not None):
            providers[ref.account_id] = ref.provider
    return tuple(AccountRef(account_id, provider) for account_id, provider in providers.items())


def accounts_target(refs: Iterable[AccountRef]) -> AccountTarget | AccountsTarget:
    """The target naming the pooled `refs`: `account` for one id, `accounts` for several.

    Pools with `merge_account_refs` first. Raises `ValueError` when `refs` is empty.
    """
    merged = merge_account_refs(refs)
    if not merged:
        raise ValueError("accounts_target needs at least one AccountRef")
    if len(merged) == 1:
        return AccountTarget(merged[0].account_id, merged[0].provider)
    return AccountsTarget(merged)


def account_refs_of(target: CitationTarget | None) -> tuple[AccountRef, ...] | None:
    """The refs an `account`/`accounts` target names; `None` for any other target or `None`."""
    if isinstance(target, AccountTarget):
        return (target.ref,)
    if isinstance(target, AccountsTarget):
        return target.accounts
    return None
