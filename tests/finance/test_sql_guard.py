"""finance.sql_guard: what reaches PostgreSQL (pure, no database)."""

from __future__ import annotations

import pytest

from citations.tools import ToolError
from finance.sql_guard import check_select

ALLOWED = [
    "SELECT * FROM account_details",
    "select source, source_account_id, account_name from ACCOUNT_DETAILS where type = 'credit';",
    "SELECT a.account_name, sum(h.institution_value)::numeric(12, 2) AS v FROM holding_details h "
    "JOIN account_details a USING (source_account_id) GROUP BY 1 ORDER BY v DESC LIMIT 5",
    "WITH t AS (SELECT ticker, quantity FROM public_holding_details) "
    "SELECT ticker, sum(quantity) FROM t GROUP BY ticker",
    "SELECT extract(year FROM origination_date), date_trunc('month', now()), current_date, coalesce(mask, '-') "
    "FROM account_details",
    "SELECT account_name, rank() OVER (ORDER BY current_balance DESC) FROM account_details "
    "WHERE current_balance BETWEEN 1 AND 2",
    "SELECT CASE WHEN type IN ('credit', 'loan') THEN -current_balance ELSE current_balance END FROM account_details",
    "SELECT * FROM account_details WHERE account_name ILIKE '%card%' AND subtype IS NOT NULL",
    "SELECT * FROM account_details WHERE source_account_id IN (SELECT source_account_id FROM holding_details)",
    "WITH a AS (SELECT * FROM account_details), b AS (SELECT * FROM a) SELECT * FROM b",
    "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 3) SELECT * FROM t",
    "/* leading */ SELECT 1 -- trailing",
    'SELECT account_name FROM account_details ORDER BY account_name COLLATE "C"',
    "SELECT (array_agg(ticker ORDER BY quantity DESC))[1] FROM holding_details",
]

REFUSED = [
    ("SELECT 1; SELECT 2", "exactly one statement"),
    ("", "empty"),
    ("RESET ROLE", "only SELECT"),
    ("SET ROLE postgres", "only SELECT"),
    ("SELECT set_config('role', 'postgres', true)", "set_config"),
    ("SELECT current_setting('role')", "current_setting"),
    ("SELECT * FROM pg_catalog.pg_class", "no schema names"),
    ("SELECT * FROM finance_account", "unknown table"),
    ("SELECT * FROM public.account_details", "no schema names"),
    ("COPY account_details TO STDOUT", "only SELECT"),
    ("SELECT pg_read_file('/etc/passwd')", "pg_read_file"),
    ("SELECT * FROM dblink('x', 'y') AS t(a int)", "functions in FROM"),
    ("SELECT pg_advisory_lock(1)", "pg_advisory_lock"),
    ("SELECT pg_sleep(1)", "pg_sleep"),
    ("LISTEN x", "only SELECT"),
    ("WITH d AS (DELETE FROM account_details RETURNING *) SELECT * FROM d", "may only SELECT"),
    ("SELECT * INTO t FROM account_details", "SELECT INTO"),
    ("SELECT * FROM account_details FOR UPDATE", "FOR UPDATE"),
    ("SELECT 'pg_class'::regclass", "regclass"),
    ("SELECT current_user", "CURRENT_DATE"),
    ("SELECT query_to_xml('select 1', true, false, '')", "query_to_xml"),
    ("SELECT xmlelement(name x)", "XmlExpr"),
    ("SELECT $1", "parameters"),
    ("SELECT pg_catalog.set_config('role', 'x', true)", "set_config"),
    ("SELECT 1 OPERATOR(public.+) 1", "qualified operators"),
    ("SELEC 1", "syntax error"),
    ("WITH finance_account AS (SELECT * FROM finance_account) SELECT * FROM finance_account", "unknown table"),
    ("WITH a AS (SELECT * FROM b), b AS (SELECT * FROM account_details) SELECT * FROM a", "unknown table"),
]


@pytest.mark.parametrize("query", ALLOWED)
def test_plain_selects_over_the_views_pass(query):
    check_select(query)


@pytest.mark.parametrize(("query", "reason"), REFUSED, ids=[q for q, _ in REFUSED])
def test_refused_with_a_reason(query, reason):
    with pytest.raises(ToolError) as caught:
        check_select(query)
    assert reason in caught.value.reason
