"""The isolation suite (SPEC 13): hostile SQL as maya while sam's rows exist, on SQLite and PostgreSQL.

Every query must either raise `ToolError` or return only maya's rows: no
value that exists only in sam's data (ids, item ids, tokens, clerk id,
official names, balances) may appear anywhere in the output, and every
account id in it must be maya's. After each call the database session is
back as it was (PostgreSQL: the app's role, read-write, no scope row).
"""

from __future__ import annotations

import contextlib
import json

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citations.tools import ToolError
from finance.demo_data import MAYA_CLERK, SAM, SAM_CLERK
from tests.finance_data import MAYA_IDS, SAM_IDS, secrets_of

SAM_SECRETS = secrets_of(SAM, SAM_CLERK)
SAM_BALANCES = {1240.77, 3120.4, 8214.03, 160.0, 4360.6, 2684.7, 1675.9}

HOSTILE = [
    # other tables, schemas and catalogs
    "SELECT * FROM finance_account",
    "SELECT * FROM public.finance_account",
    "SELECT * FROM finance_holding",
    "SELECT * FROM finance_connection",
    'SELECT * FROM "finance_account"',
    "SELECT * FROM ONLY finance_account",
    "TABLE finance_account",
    "SELECT * FROM auth_user",
    "SELECT key FROM authtoken_token",
    "SELECT * FROM ai_chat_logs",
    "SELECT * FROM finance_sql_scope",
    "SELECT * FROM pg_catalog.pg_class",
    "SELECT * FROM pg_roles",
    "SELECT query FROM pg_stat_activity",
    "SELECT * FROM information_schema.tables",
    "SELECT * FROM sqlite_master",
    "SELECT * FROM sqlite_schema",
    "SELECT * FROM main.finance_account",
    "SELECT * FROM account_details a JOIN finance_account f ON true",
    "SELECT (SELECT string_agg(source_account_id, ',') FROM finance_account)",
    "VALUES ((SELECT count(*) FROM finance_account))",
    # role and settings
    "RESET ROLE",
    "SET ROLE postgres",
    "SET ROLE NONE",
    "SET SESSION AUTHORIZATION postgres",
    "SELECT set_config('role', 'postgres', true), * FROM account_details",
    "SELECT set_config('role', 'none', false)",
    "SELECT pg_catalog.set_config('role', 'none', true)",
    "SELECT current_setting('role')",
    "SELECT set_config('statement_timeout', '0', true)",
    "SELECT set_config('transaction_read_only', 'off', true)",
    "SET statement_timeout = 0",
    "SELECT finance_sql_scope_user()",
    # more than one statement, transaction control
    "SELECT * FROM account_details; SELECT * FROM finance_account",
    "SELECT 1; DELETE FROM finance_account",
    "SELECT * FROM account_details WHERE 1 = 1; RESET ROLE",
    "ROLLBACK; SELECT * FROM finance_account",
    "COMMIT",
    "BEGIN; SELECT * FROM finance_account; COMMIT",
    # writes, DDL, COPY
    "COPY finance_account TO STDOUT",
    "COPY (SELECT * FROM finance_account) TO '/tmp/silvia_x'",
    "WITH d AS (DELETE FROM finance_account RETURNING *) SELECT * FROM d",
    "WITH u AS (UPDATE account_details SET current_balance = 0 RETURNING *) SELECT * FROM u",
    "INSERT INTO finance_sql_scope VALUES (pg_backend_pid(), 2)",
    "DELETE FROM account_details",
    "UPDATE finance_account SET user_id = 1",
    "DROP VIEW account_details",
    "CREATE TABLE x AS SELECT * FROM finance_account",
    "CREATE TEMP VIEW v AS SELECT * FROM finance_account",
    "SELECT * INTO x FROM account_details",
    "SELECT * FROM account_details FOR UPDATE",
    "DO $$ BEGIN PERFORM 1; END $$",
    "PREPARE p AS SELECT * FROM finance_account",
    "DECLARE c CURSOR FOR SELECT * FROM finance_account",
    "EXPLAIN SELECT * FROM finance_account",
    "VACUUM",
    "ATTACH DATABASE 'var/db.sqlite3' AS real",
    "ATTACH DATABASE ':memory:' AS m",
    "PRAGMA table_info(finance_account)",
    # functions that escape or hold resources
    "SELECT pg_read_file('/etc/passwd')",
    "SELECT pg_ls_dir('.')",
    "SELECT lo_import('/etc/passwd')",
    "SELECT * FROM dblink('dbname=postgres', 'select * from finance_account') AS t(a text)",
    "SELECT query_to_xml('select * from finance_account', true, false, '')",
    "SELECT pg_sleep(30)",
    "SELECT pg_advisory_lock(1)",
    "SELECT pg_try_advisory_xact_lock(1)",
    "LISTEN silvia",
    "NOTIFY silvia",
    "SELECT pg_notify('c', 'x')",
    "SELECT pg_terminate_backend(pg_backend_pid())",
    "SELECT pg_reload_conf()",
    "SELECT load_extension('x')",
    "SELECT * FROM generate_series(1, 100000000)",
    "SELECT 'finance_account'::regclass",
    "SELECT current_user, session_user",
    "SELECT version()",
    "SELECT xmlelement(name x, 1)",
    # runaway queries and huge values
    "SELECT count(*) FROM account_details a, account_details b, account_details c, account_details d, "
    "account_details e, account_details f, account_details g, account_details h",
    "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t",
    "SELECT repeat('x', 100000000)",
    "SELECT printf('%.*c', 100000000, 'x')",
    "SELECT zeroblob(1000000000)",
    "SELECT a.* FROM account_details a, account_details b, account_details c",
    # another user's data through the views
    "SELECT * FROM account_details WHERE source_account_id = 'NPRVdD53X83RZJzzzzgEOzdmenCkhvMdgaKjI'",
    "SELECT * FROM account_details WHERE clerk_id = 'user_sgHYdbyXJZBFwTXpKVeBPog9WzG'",
    "SELECT * FROM account_details WHERE user_id = 2",
    "SELECT * FROM account_details WHERE 1 / (CASE WHEN account_name = 'Venture card' THEN 0 ELSE 1 END) = 1",
    "SELECT * FROM holding_details UNION ALL SELECT * FROM holding_details",
    "SELECT * FROM account_details /* comment */ -- ; DROP VIEW account_details",
    "SELECT * FROM account_details; -- trailing",
    "SELECT $1",
    "SELECT * FROM account_details WHERE account_name = 'x' OR 1 = 1",
    "WITH finance_account AS (SELECT * FROM finance_account) SELECT * FROM finance_account",
    "SELECT * FROM pragma_table_info('finance_account')",
    "SELECT * FROM pragma_database_list",
    "SELECT account_details FROM account_details",
    "SELECT \"set_config\"('role', 'postgres', true)",
    "SELECT * FROM account_details, LATERAL (SELECT * FROM finance_account) f",
    "SELECT string_agg(a.account_name || b.account_name || c.account_name || d.account_name, '') "
    "FROM account_details a, account_details b, account_details c, account_details d, account_details e",
]

pytest_plugins = ["tests.finance_fixtures"]


def _strings(value, found: list) -> list:
    if isinstance(value, dict):
        for item in value.values():
            _strings(item, found)
    elif isinstance(value, list):
        for item in value:
            _strings(item, found)
    else:
        found.append(value)
    return found


def assert_only_mayas(output: dict) -> None:
    text = json.dumps(output)
    for secret in SAM_SECRETS:
        assert secret not in text
    for value in _strings(output["rows"], []):
        assert not (isinstance(value, float) and value in SAM_BALANCES)
    for row in output["rows"]:
        for column in (
            "source_account_id",
            "account_id",
            "snaptrade_account_id",
            "manual_account_uuid",
            "account_uuid",
        ):
            if row.get(column) is not None:
                assert row[column] in MAYA_IDS
        if row.get("clerk_id") is not None:
            assert row["clerk_id"] == MAYA_CLERK


def assert_session_clean() -> None:
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_user = session_user, current_setting('transaction_read_only'), "
            "(SELECT count(*) FROM finance_sql_scope), current_setting('statement_timeout')"
        )
        assert cursor.fetchone() == (True, "off", 0, "0")


def test_the_suite_is_big_enough():
    assert len(HOSTILE) >= 50


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_query_sees_only_the_callers_rows(finance_users, sql_tool, query):
    maya, _sam = finance_users
    try:
        output = sql_tool.run({"query": query}, user=maya)
    except ToolError as error:
        assert error.reason and len(error.reason) < 400
        for secret in SAM_SECRETS:
            assert secret not in error.reason
    else:
        assert_only_mayas(output)
    assert_session_clean()


def test_the_views_hold_only_the_callers_rows(finance_users, sql_tool):
    maya, sam = finance_users
    as_maya = sql_tool.run({"query": "SELECT source_account_id FROM account_details"}, user=maya)
    as_sam = sql_tool.run({"query": "SELECT source_account_id FROM account_details"}, user=sam)
    assert {row["source_account_id"] for row in as_maya["rows"]} == MAYA_IDS
    assert {row["source_account_id"] for row in as_sam["rows"]} == SAM_IDS


def test_a_failed_query_leaves_the_next_one_working(finance_users, sql_tool):
    maya, _ = finance_users
    with pytest.raises(ToolError):
        sql_tool.run({"query": "SELECT no_such_column FROM account_details"}, user=maya)
    out = sql_tool.run({"query": "SELECT count(*) AS n FROM holding_details"}, user=maya)
    assert out["rows"] == [{"n": 6}]  # 401(k) FXAIX, brokerage VOO and AAPL, Roth VTI and VXUS, wallet ETH
    assert_session_clean()


def test_runaway_query_is_stopped_with_a_timeout(finance_users, sql_tool):
    maya, _ = finance_users
    with pytest.raises(ToolError, match=r"ran longer than 0\.7 s"):
        sql_tool.run(
            {"query": "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t"},
            user=maya,
        )


def test_too_many_rows_is_an_error(finance_users):
    from finance.sql_tool import ExecuteSqlTool

    maya, _ = finance_users
    with pytest.raises(ToolError, match="more than 3 rows"):
        ExecuteSqlTool(max_rows=3).run({"query": "SELECT account_name FROM account_details"}, user=maya)
    assert (
        len(ExecuteSqlTool(max_rows=11).run({"query": "SELECT account_name FROM account_details"}, user=maya)["rows"])
        == 11
    )


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
