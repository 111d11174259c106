"""finance.sql_tool: the executor's interface, input errors, JSON-safe values (SPEC 4, 13).

Targets end to end: the tool's rows through `to_citable_content` (SPEC 3, 4, 13)."""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal

import pytest
from django.contrib.auth.models import AnonymousUser

from citations.citable import to_citable_content
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


def test_a_database_found_ready_is_not_asked_again_one_not_ready_is(db, settings):
    """Each turn builds its tool list: the readiness query runs until the database is found ready, then not."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    if connection.vendor != "postgresql":
        pytest.skip("the readiness query is PostgreSQL's")
    role = settings.FINANCE_SQL_READER_ROLE
    settings.FINANCE_SQL_READER_ROLE = "silvia_no_such_role_for_this_test"
    for _ in range(2):
        with CaptureQueriesContext(connection) as queries:
            assert execute_sql_tool() is None
        assert ["to_regclass" in query["sql"] for query in queries.captured_queries] == [True]
    settings.FINANCE_SQL_READER_ROLE = role
    assert execute_sql_tool() is not None
    with CaptureQueriesContext(connection) as queries:
        assert execute_sql_tool() is not None
    assert queries.captured_queries == []


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


SAPPHIRE = "u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dK"
DOUBLE_CASH = "LzdocJ2isAjIhKtJ0RlgLKOmxgJTeKdNnFRIB"


def blocks(tool, user, query):
    tool_input = {"query": query}
    output = tool.run(tool_input, user=user)
    return {
        block.source: (block.title, block.target.to_json() if block.target else None)
        for block in to_citable_content("execute_sql", tool_input, output)
    }


def test_credit_card_label_over_two_cards_is_accounts_with_both(finance_users, sql_tool):
    maya, _ = finance_users
    got = blocks(
        sql_tool,
        maya,
        "SELECT source, source_account_id, account_name, current_balance FROM account_details "
        "WHERE type = 'credit' ORDER BY current_balance DESC",
    )
    assert got == {
        "silvia://your-account/credit-card": (
            "Credit card",
            {
                "kind": "accounts",
                "accounts": [
                    {"accountId": SAPPHIRE, "provider": "plaid"},
                    {"accountId": DOUBLE_CASH, "provider": "plaid"},
                ],
            },
        ),
    }


def test_sapphire_preferred_is_one_account(finance_users, sql_tool):
    maya, _ = finance_users
    got = blocks(
        sql_tool,
        maya,
        "SELECT source, source_account_id, account_display_name, purchase_apr FROM account_details "
        "WHERE account_display_name = 'Sapphire Preferred'",
    )
    assert got == {
        "silvia://your-account/sapphire-preferred": (
            "Sapphire Preferred",
            {"kind": "account", "accountId": SAPPHIRE, "provider": "plaid"},
        )
    }


def test_crypto_wallet_names_no_account(finance_users, sql_tool):
    maya, _ = finance_users
    got = blocks(
        sql_tool,
        maya,
        "SELECT source, source_account_id, account_name, current_balance FROM account_details WHERE type = 'crypto'",
    )
    assert got == {"silvia://your-account/crypto-wallet": ("Crypto wallet", None)}
    got = blocks(
        sql_tool,
        maya,
        "SELECT source, source_account_id, account_id, account_name, ticker FROM holding_details "
        "WHERE security_type = 'crypto'",
    )
    assert got == {"silvia://your-account/crypto-wallet": ("Crypto wallet", None)}


def test_no_id_column_is_untyped_like_legacy(finance_users, sql_tool):
    maya, _ = finance_users
    got = blocks(sql_tool, maya, "SELECT account_name, current_balance FROM account_details WHERE type = 'credit'")
    assert got == {"silvia://your-account/credit-card": ("Credit card", None)}


def test_clerk_id_item_id_and_tokens_never_become_ids(finance_users, sql_tool):
    maya, _ = finance_users
    got = blocks(
        sql_tool,
        maya,
        "SELECT account_name, clerk_id, item_id, access_token FROM account_details WHERE account_name = 'Checking'",
    )
    assert got == {"silvia://your-account/checking": ("Checking", None)}


def test_provider_columns_of_snaptrade_and_manual(finance_users, sql_tool):
    maya, _ = finance_users
    got = blocks(
        sql_tool,
        maya,
        "SELECT snaptrade_account_id, account_name, ticker FROM holding_details WHERE account_name = 'Brokerage'",
    )
    assert got["silvia://your-account/brokerage"][1] == {
        "kind": "account",
        "accountId": "9a2ef80f-58ee-4571-b499-8d7c4093f6de",
        "provider": "snaptrade",
    }
    got = blocks(sql_tool, maya, "SELECT manual_account_uuid, account_name FROM account_details WHERE type = 'loan'")
    assert got == {
        "silvia://your-account/home-mortgage": (
            "Home mortgage",
            {"kind": "account", "accountId": "353c631c-dfd4-4f37-9200-339d068739fa", "provider": "manual"},
        )
    }
    got = blocks(sql_tool, maya, "SELECT account_id, account_name FROM account_details WHERE account_name = 'Checking'")
    assert got["silvia://your-account/checking"][1] == {
        "kind": "account",
        "accountId": "XuDL7DxtpYlSXpfKtHF4vUCsMehGAkWvj7FAc",
        "provider": None,
    }


@pytest.mark.parametrize(
    "query",
    [
        "SELECT sum(current_balance) AS total FROM account_details WHERE type = 'depository'",
        "SELECT source, source_account_id FROM account_details WHERE type = 'nothing'",
    ],
)
def test_no_label_or_no_rows_is_the_portfolio(finance_users, sql_tool, query):
    maya, _ = finance_users
    assert blocks(sql_tool, maya, query) == {"silvia://your-portfolio": ("Your portfolio", {"kind": "portfolio"})}
