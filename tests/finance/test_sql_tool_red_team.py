"""The red team's findings F2, F3, F4, F8 against execute_sql (SPEC 13), on SQLite and PostgreSQL: numbers
beyond a float, SQLite's cap on one value and on printf()/LIKE, huge results and rows refused before they
are in memory, EXPLAIN refused."""

from __future__ import annotations

import contextlib

import pytest
from django.db import connection

from citations.tools import ToolError
from tests.finance.finance_sql_support import assert_session_clean

# --- red-team findings F2, F3, F4, F8 ------------------------------------------------

_POSTGRES_OVERFLOWS = [
    "SELECT '1e400'::numeric AS big",
    "SELECT max(current_balance)*1e300*1e300 AS m FROM account_details",
    "SELECT ARRAY['1e400'::numeric] AS a",
]
_SQLITE_OVERFLOWS = [
    "SELECT 1e400 AS big",
    "SELECT max(current_balance)*1e300*1e300 AS m FROM account_details",
    "SELECT -1e308 * 10 AS small",
]


def test_a_number_beyond_a_float_is_a_tool_error_on_both_databases(finance_users, sql_tool):
    from finance.sql_values import NUMBER_TOO_LARGE

    maya, _ = finance_users
    for query in _POSTGRES_OVERFLOWS if connection.vendor == "postgresql" else _SQLITE_OVERFLOWS:
        with pytest.raises(ToolError) as caught:
            sql_tool.run({"query": query}, user=maya)
        assert caught.value.reason == NUMBER_TOO_LARGE, query
        assert_session_clean()
    # Large finite numbers still come through; PostgreSQL's own infinities stay "Infinity" text.
    out = sql_tool.run({"query": "SELECT 1e300 * 10 AS a, -1e308 AS b"}, user=maya)
    assert out["rows"] == [{"a": 1e301, "b": -1e308}]
    if connection.vendor == "postgresql":
        out = sql_tool.run({"query": "SELECT 'Infinity'::float8 AS i, '-Infinity'::numeric AS j"}, user=maya)
        assert out["rows"] == [{"i": "Infinity", "j": "-Infinity"}]


def test_sqlite_caps_one_value_so_one_function_call_stays_short(finance_users):
    import time

    from finance.sql_tool import ExecuteSqlTool

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's progress handler does not run inside a function; PostgreSQL's timeout does")
    maya, _ = finance_users
    tool = ExecuteSqlTool(timeout_ms=1000)
    assert tool.max_value_chars == 65_536
    too_long = VALUE_TOO_LONG
    for query in (
        "SELECT length(printf('%.*c', 65000, 'a') || printf('%.*c', 1000, 'a')) AS n",
        "SELECT length(replace(printf('%.*c', 60000, 'a'), 'a', 'aa')) AS n",
        "WITH RECURSIVE r(s) AS (SELECT 'x' UNION ALL SELECT s || s FROM r) SELECT length(s) AS n FROM r",
    ):
        with pytest.raises(ToolError) as caught:
            tool.run({"query": query}, user=maya)
        assert caught.value.reason == too_long
    # A printf() width or precision past the cap is refused at once: the red team's 23-second instr().
    started = time.monotonic()
    with pytest.raises(ToolError) as caught:
        tool.run(
            {"query": "SELECT instr(printf('%.*c', 2000000, 'a'), printf('%.*c', 1000000, 'a') || 'b') AS i"},
            user=maya,
        )
    assert caught.value.reason == (
        "printf(): a width or precision of 2000000 is more than 65536 (FINANCE_SQL_MAX_VALUE_CHARS)"
    )
    assert time.monotonic() - started < 1.0
    assert tool.run({"query": "SELECT length(printf('%.*c', 65535, 'a')) AS n"}, user=maya)["rows"] == [{"n": 65535}]
    # LIKE and GLOB patterns are capped too (their matching is one call, character by character).
    with pytest.raises(ToolError) as caught:
        tool.run({"query": "SELECT 'a' LIKE ('%' || printf('%.*c', 201, 'a')) AS m"}, user=maya)
    assert caught.value.reason == "error: LIKE or GLOB pattern too complex"
    # The worst instr() the cap allows: a 65,536-character haystack, a needle of half of it that never matches.
    worst = [
        "SELECT instr(printf('%.*c', 65535, 'a'), printf('%.*c', 32766, 'a') || 'b') AS i",
        "SELECT instr(h, n) AS i FROM (SELECT printf('%.*c', 65535, 'a') AS h, printf('%.*c', 32766, 'a') || 'b' AS n) "
        "CROSS JOIN (SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3)",
        "SELECT printf('%.*c', 65535, 'a') LIKE ('%' || printf('%.*c', 198, 'a') || 'b') AS m",
        "SELECT printf('%.*c', 65535, 'a') GLOB ('*' || printf('%.*c', 198, 'a') || 'b') AS m",
        "SELECT length(replace(printf('%.*c', 65535, 'a'), 'a', 'a')) AS n",
    ]
    for query in worst:
        started = time.monotonic()
        with contextlib.suppress(ToolError):
            tool.run({"query": query}, user=maya)
        assert time.monotonic() - started < 2.0, query


def _peak_bytes_while(call) -> int:
    import tracemalloc

    tracemalloc.start()
    try:
        call()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


TOO_LARGE = "the result is too large (more than 1000000 characters of text): select fewer columns or rows"
VALUE_TOO_LONG = "a value or row is longer than 65536 characters (FINANCE_SQL_MAX_VALUE_CHARS)"


def _refused_within(query: str, user, megabytes: int) -> str:
    from finance.sql_tool import ExecuteSqlTool

    tool = ExecuteSqlTool(timeout_ms=20_000, max_rows=1000)
    caught: list[ToolError] = []

    def call() -> None:
        with pytest.raises(ToolError) as error:
            tool.run({"query": query}, user=user)
        caught.append(error.value)

    peak = _peak_bytes_while(call)
    assert peak < megabytes * 1024 * 1024, peak
    assert_session_clean()
    return caught[0].reason


def test_a_huge_result_stops_at_the_text_cap_before_it_is_in_memory(finance_users):
    maya, _ = finance_users
    if connection.vendor == "postgresql":
        # 1,000 rows of 32,768 characters (a doubled string): 32 MB.
        query = (
            "WITH RECURSIVE s(v, k) AS (SELECT 'x'::text, 0 UNION ALL SELECT v || v, k + 1 FROM s WHERE k < 15), "
            "r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 1000) "
            "SELECT s.v AS s FROM r CROSS JOIN s WHERE s.k = 15"
        )
    else:
        # 1,000 rows of 60,000 characters: 60 MB.
        query = (
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 1000) "
            "SELECT printf('%.*c', 60000, 'x') AS s FROM r"
        )
    assert _refused_within(query, maya, megabytes=12) == TOO_LARGE
    # The same query under the cap still answers.
    out = _tool().run({"query": query.replace("n < 1000", "n < 10")}, user=maya)
    assert len(out["rows"]) == 10


def _tool():
    from finance.sql_tool import ExecuteSqlTool

    return ExecuteSqlTool(timeout_ms=20_000, max_rows=1000)


def test_one_huge_row_is_refused_before_it_is_in_memory(finance_users):
    maya, _ = finance_users
    # The red team's query (PostgreSQL: 29 rows, the last one 256 MB, 512 MB in all), and one row of 128 MB.
    cast = "::text" if connection.vendor == "postgresql" else ""
    doubling = (
        f"WITH RECURSIVE r(s, n) AS (SELECT 'x'{cast}, 0 UNION ALL SELECT s || s, n + 1 FROM r WHERE n < 28) "
        "SELECT s FROM r"
    )
    assert _refused_within(doubling, maya, megabytes=12) == VALUE_TOO_LONG
    assert _refused_within(doubling.replace("n < 28", "n < 27") + " WHERE n = 27", maya, megabytes=12) == (
        VALUE_TOO_LONG
    )
    # Rows just under the cap pass.
    out = _tool().run({"query": doubling.replace("n < 28", "n < 15")}, user=maya)
    assert len(out["rows"]) == 16 and len(out["rows"][-1]["s"]) == 32768


@pytest.mark.parametrize(
    "query",
    [
        "EXPLAIN SELECT * FROM account_details",
        "explain select * from account_details",
        "  /* a comment */ -- another\n\tEXPLAIN SELECT source FROM account_details",
    ],
)
def test_explain_is_refused_on_both_databases(finance_users, sql_tool, query):
    with pytest.raises(ToolError) as caught:
        sql_tool.run({"query": query}, user=finance_users[0])
    assert caught.value.reason == "only SELECT is allowed, not EXPLAIN"


@pytest.mark.parametrize(
    "query",
    [
        "EXPLAIN QUERY PLAN SELECT * FROM account_details",
        "EXPLAIN ANALYZE SELECT * FROM account_details",
        "EXPLAIN (FORMAT JSON) SELECT * FROM account_details",
    ],
)
def test_explain_variants_are_refused(finance_users, sql_tool, query):
    with pytest.raises(ToolError) as caught:
        sql_tool.run({"query": query}, user=finance_users[0])
    if connection.vendor == "sqlite":
        assert caught.value.reason == "only SELECT is allowed, not EXPLAIN"
    else:  # PostgreSQL's parser: EXPLAIN QUERY PLAN is not its syntax, the others are EXPLAIN
        assert caught.value.reason.startswith(("only SELECT is allowed, not EXPLAIN", "syntax error"))


def test_a_column_named_like_explain_is_not_refused(finance_users, sql_tool):
    out = sql_tool.run({"query": "SELECT 1 AS explained FROM account_details LIMIT 1"}, user=finance_users[0])
    assert out["rows"] == [{"explained": 1}]
