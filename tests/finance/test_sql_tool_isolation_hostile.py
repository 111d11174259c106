"""The isolation suite (SPEC 13): hostile SQL as maya while sam's rows exist, on SQLite and PostgreSQL.

Every query must either raise `ToolError` or return only maya's rows: no value that exists only in sam's
data (ids, item ids, tokens, clerk id, official names, balances) may appear anywhere in the output, and
every account id in it must be maya's. After each call the database session is back as it was
(PostgreSQL: the app's role, read-write, no scope row). Also: a failed query, a runaway one, too many rows."""

from __future__ import annotations

import pytest

from citations.tools import ToolError
from tests.finance.finance_sql_support import SAM_SECRETS, assert_only_mayas, assert_session_clean
from tests.finance_data import MAYA_IDS, SAM_IDS

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
