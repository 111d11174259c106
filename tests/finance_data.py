"""Values from the demo financial data that the finance tests check against."""

from __future__ import annotations

from finance.demo_data import MAYA, SAM


def ids_of(connections) -> set[str]:
    """Every `source_account_id` in a demo data block (MAYA or SAM)."""
    return {account["source_account_id"] for *_, accounts in connections for account in accounts}


def secrets_of(connections, clerk_id: str) -> set[str]:
    """Strings that exist only in that user's data: account ids, item ids, tokens, clerk id, official names."""
    values = {clerk_id}
    for _source, _institution, item_id, token, accounts in connections:
        values |= {item_id, token}
        for account in accounts:
            values |= {account["source_account_id"], account.get("official_name", "")}
    return {value for value in values if value}


def holdings_of(connections) -> int:
    """How many holdings a demo data block seeds."""
    return sum(len(account.get("holdings", ())) for *_, accounts in connections for account in accounts)


MAYA_IDS = ids_of(MAYA)
SAM_IDS = ids_of(SAM)
