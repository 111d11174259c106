"""finance.sql_tool: the executor's interface, input errors, JSON-safe values (SPEC 4, 13)."""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal

import pytest
from django.contrib.auth.models import AnonymousUser

from citations.tools import ToolError, ToolExecutor
from finance.sql_tool import ExecuteSqlTool, execute_sql_tool
from finance.sql_values import json_safe


def test_it_is_a_tool_executor_named_execute_sql(db):
    tool = execute_sql_tool()
    assert isinstance(tool, ToolExecutor) and tool.name == "execute_sql"
    definition = tool.definition()
    assert definition["name"] == "execute_sql"
    assert definition["input_schema"]["required"] == ["query"]
    for name in ("account_details(", "holding_details(", "public_holding_details(", "source_account_id"):
        assert name in definition["description"]


@pytest.mark.parametrize(
    ("tool_input", "reason"),
    [
        ({}, "input.query"),
        ({"query": 3}, "input.query"),
        ({"query": "   "}, "input.query"),
        ({"query": "SELECT 1" + " " * 20_000}, "longer than"),
        ({"query": "SELECT '\x00'"}, "NUL"),
        ({"query": "SELECT '\ud800' FROM account_details"}, "surrogate"),
    ],
)
def test_bad_input_is_a_tool_error(finance_users, sql_tool, tool_input, reason):
    with pytest.raises(ToolError, match=reason):
        sql_tool.run(tool_input, user=finance_users[0])


def test_no_user_is_a_tool_error(db, sql_tool):
    with pytest.raises(ToolError, match="no signed-in user"):
        sql_tool.run({"query": "SELECT 1"}, user=AnonymousUser())
    with pytest.raises(ToolError, match="no signed-in user"):
        sql_tool.run({"query": "SELECT 1"}, user=None)


def test_values_are_json_safe(finance_users, sql_tool):
    maya, _ = finance_users
    out = sql_tool.run(
        {
            "query": "SELECT account_name, current_balance, interest_rate, origination_date, "
            "remaining_term_months FROM account_details WHERE type = 'loan'"
        },
        user=maya,
    )
    assert out["columns"] == [
        "account_name",
        "current_balance",
        "interest_rate",
        "origination_date",
        "remaining_term_months",
    ]
    assert out["rows"] == [
        {
            "account_name": "Home mortgage",
            "current_balance": 312450.18,
            "interest_rate": 6.875,
            "origination_date": "2024-06-14",
            "remaining_term_months": 330,
        }
    ]
    json.dumps(out, allow_nan=False)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Decimal("2318.45"), 2318.45),
        (Decimal("NaN"), "NaN"),
        (float("inf"), "Infinity"),
        (dt.date(2026, 1, 2), "2026-01-02"),
        (dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC), "2026-01-02T03:04:05+00:00"),
        (b"\x01\xff", "01ff"),
        ((1, Decimal("2")), [1, 2.0]),
    ],
)
def test_json_safe(value, expected):
    assert json_safe(value) == expected


def test_result_text_cap(finance_users):
    maya, _ = finance_users
    with pytest.raises(ToolError, match="too large"):
        ExecuteSqlTool(max_chars=100).run({"query": "SELECT * FROM account_details"}, user=maya)


def test_deeply_nested_query_is_a_tool_error(finance_users, sql_tool):
    # 4,000 nested additions: deeper than Python's recursion limit for the guard's walk
    with pytest.raises(ToolError):
        sql_tool.run({"query": "SELECT " + "1 + " * 4000 + "1 FROM account_details"}, user=finance_users[0])


def test_deep_parentheses_answer_or_refuse_but_never_crash(finance_users, sql_tool):
    try:
        out = sql_tool.run({"query": "SELECT " + "(" * 3000 + "1" + ")" * 3000 + " AS one"}, user=finance_users[0])
    except ToolError:
        return
    assert out["rows"] == [{"one": 1}]


def test_factory_gives_none_when_the_reader_role_is_missing(db, settings):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("roles exist on PostgreSQL only")
    settings.FINANCE_SQL_READER_ROLE = "silvia_no_such_role_for_this_test"
    assert execute_sql_tool() is None


def test_a_tool_that_raises_is_logged_by_class_only_and_gives_is_error(caplog):
    """A tool's unexpected exception may quote row values: the log names its class, no message, no traceback."""
    import logging
    import uuid

    from live.checkpoint import TurnState
    from live.tool_calls import tool_result

    class Leaky:
        name = "execute_sql"

        def definition(self) -> dict:
            return {}

        def run(self, tool_input, *, user):
            raise OverflowError("value 2318.45 of NPRVdD53X83RZJzzzzgEOzdmenCkhvMdgaKjI is out of range")

    block = {"type": "tool_use", "id": "toolu_1", "name": "execute_sql", "input": {"query": "SELECT 1"}}
    tools: dict[str, ToolExecutor] = {"execute_sql": Leaky()}
    turn_id = uuid.UUID(int=1)
    with caplog.at_level(logging.DEBUG, logger="live.tool_calls"):
        result, sources = tool_result(tools, block, None, user=None, state=TurnState(messages=[]), turn_id=turn_id)
    assert sources == []
    assert result == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "is_error": True,
        "content": "execute_sql failed",
    }
    [record] = [r for r in caplog.records if r.name == "live.tool_calls"]
    # The class and where it was raised (file, line, function), never the message.
    assert re.fullmatch(
        rf"turn {turn_id}: tool execute_sql raised OverflowError at test_sql_tool\.py:\d+ \(run\)",
        record.getMessage(),
    )
    assert record.exc_info is None
    assert record.exc_info is None and record.exc_text is None
    assert "2318" not in caplog.text and "NPRVdD53X" not in caplog.text
