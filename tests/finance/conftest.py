"""Fixtures for the finance tests: maya and sam with the demo financial data, and the tool."""

from __future__ import annotations

import pytest

from finance import sql_sqlite
from finance.demo import seed_demo_finance
from finance.sql_tool import ExecuteSqlTool
from tests.factories import UserFactory


@pytest.fixture
def finance_users(db):
    """(maya, sam), each with their demo accounts and holdings."""
    sql_sqlite.clear_cache()
    maya = UserFactory.create(username="maya")
    sam = UserFactory.create(username="sam")
    seed_demo_finance(maya=maya, sam=sam)
    yield maya, sam
    sql_sqlite.clear_cache()


@pytest.fixture
def sql_tool():
    """The tool with a short time limit, so hostile queries that spin end fast."""
    return ExecuteSqlTool(timeout_ms=700, max_rows=1000)
