"""Fixtures for the finance tests: maya and sam with the demo financial data, and the tool."""

from __future__ import annotations

import pytest

from finance import sql_sqlite
from finance.demo import MAYA, SAM, seed_demo_finance
from finance.sql_tool import ExecuteSqlTool
from tests.factories import UserFactory


@pytest.fixture
def finance_users(db):
    """(maya, sam), each with their demo accounts and holdings."""
    sql_sqlite.clear_cache()
    maya = UserFactory(username="maya")
    sam = UserFactory(username="sam")
    seed_demo_finance(maya=maya, sam=sam)
    yield maya, sam
    sql_sqlite.clear_cache()


@pytest.fixture
def sql_tool():
    """The tool with a short time limit, so hostile queries that spin end fast."""
    return ExecuteSqlTool(timeout_ms=700, max_rows=1000)


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


MAYA_IDS = ids_of(MAYA)
SAM_IDS = ids_of(SAM)
