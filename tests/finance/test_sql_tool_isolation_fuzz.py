"""The isolation suite (SPEC 13), generated (hypothesis), on SQLite and PostgreSQL: random safe SELECTs over
the three views never return another user's row, and soups of SQL tokens are a tool error or the caller's
rows, the session back as it was after each."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citations.tools import ToolError
from tests.finance.finance_sql_support import assert_only_mayas, assert_session_clean

# Random safe SELECTs: they must all succeed and never hold a row of sam's.
_VIEWS = {
    "account_details": (
        ["source", "source_account_id", "account_name", "type", "currency", "account_id"],
        ["current_balance"],
    ),
    "holding_details": (
        ["source", "source_account_id", "account_name", "ticker", "security_type"],
        ["quantity", "institution_value"],
    ),
    "public_holding_details": (
        ["source", "source_account_id", "account_name", "ticker", "exchange"],
        ["quantity", "market_value"],
    ),
}
_TEXTS = [
    "plaid",
    "manual",
    "snaptrade",
    "credit",
    "Brokerage",
    "Venture card",
    "AAPL",
    "NPRVdD53X83RZJzzzzgEOzdmenCkhvMdgaKjI",
    "x",
]


@st.composite
def safe_selects(draw) -> str:
    view = draw(st.sampled_from(sorted(_VIEWS)))
    texts, numbers = _VIEWS[view]
    columns = draw(st.lists(st.sampled_from(texts + numbers), min_size=1, max_size=4, unique=True))
    where = []
    for _ in range(draw(st.integers(0, 2))):
        if draw(st.booleans()):
            column, op = draw(st.sampled_from(texts)), draw(st.sampled_from(["=", "<>", "<", ">="]))
            where.append(f"{column} {op} '{draw(st.sampled_from(_TEXTS))}'")
        else:
            column, op = draw(st.sampled_from(numbers)), draw(st.sampled_from(["=", "<", ">", "<>"]))
            where.append(f"{column} {op} {draw(st.integers(-10, 100000))}")
    clause = f" WHERE {' OR '.join(where) if draw(st.booleans()) else ' AND '.join(where)}" if where else ""
    shape = draw(st.sampled_from(["plain", "group", "union", "sub"]))
    if shape == "group":
        key = columns[0]
        return f"SELECT {key}, count(*) AS n FROM {view}{clause} GROUP BY {key} ORDER BY n DESC"
    if shape == "union":
        return f"SELECT {', '.join(columns)} FROM {view}{clause} UNION ALL SELECT {', '.join(columns)} FROM {view}"
    if shape == "sub":
        return f"SELECT * FROM (SELECT {', '.join(columns)} FROM {view}{clause}) AS s LIMIT {draw(st.integers(0, 50))}"
    return f"SELECT {', '.join(columns)} FROM {view}{clause} ORDER BY 1"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=safe_selects())
def test_random_safe_selects_never_return_another_users_row(finance_users, sql_tool, query):
    maya, _ = finance_users
    output = sql_tool.run({"query": query}, user=maya)
    assert_only_mayas(output)


# Token soup: fragments of SQL, hostile and not, in random order. Whatever
# comes out must be a ToolError or maya's rows, never another exception.
_FRAGMENTS = [
    "SELECT",
    "*",
    "FROM",
    "account_details",
    "holding_details",
    "public_holding_details",
    "finance_account",
    "pg_class",
    "sqlite_master",
    "(",
    ")",
    ",",
    ";",
    "'",
    '"',
    "--",
    "/*",
    "*/",
    "\n",
    "$$",
    "\\",
    "E'\\''",
    "set_config('role', 'postgres', true)",
    "current_setting('role')",
    "pg_sleep(0.01)",
    "count(*)",
    "1",
    "x",
    "UNION ALL",
    "WITH",
    "AS",
    "WHERE",
    "=",
    "source_account_id",
    "account_name",
    "LIMIT",
    "JOIN",
    "ON",
    "true",
    "::regclass",
    "::text",
    "DELETE",
    "INSERT INTO",
    "VALUES",
    "RETURNING",
    "COPY",
    "TO STDOUT",
    "SET ROLE",
    "RESET ROLE",
    "LATERAL",
    "ARRAY[",
    "]",
    "ROW(",
    "'NPRVdD53X83RZJzzzzgEOzdmenCkhvMdgaKjI'",
    "OR 1 = 1",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=14))
def test_token_soup_is_a_tool_error_or_the_callers_rows(finance_users, sql_tool, parts):
    maya, _ = finance_users
    try:
        output = sql_tool.run({"query": " ".join(parts)}, user=maya)
    except ToolError:
        pass
    else:
        assert_only_mayas(output)
    assert_session_clean()
