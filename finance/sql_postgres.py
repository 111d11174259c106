"""Running one checked SELECT as a user on PostgreSQL (SPEC 13).

The walls, outermost first:

1. `finance.sql_guard.check_select`: one SELECT over the views, allowlisted
   functions and types only (refuses `set_config`, `SET ROLE`, ...).
2. A savepoint (or transaction) that is always rolled back, in which the app
   writes the scope row `(pg_backend_pid(), user id)` to `finance_sql_scope`,
   then sets `statement_timeout`, `transaction_read_only` and
   `SET LOCAL ROLE <reader>`. The row is never committed, so no other session
   ever sees it, and the reader has no privilege on the table.
3. The reader role may SELECT the three views and nothing else of ours. The
   views belong to a view-owner role whose reads of the base tables are
   filtered by row-level security to `user_id = finance_sql_scope_user()`,
   a SECURITY DEFINER function that reads the scope row. With no scope row
   (or more than one) it is NULL and the views are empty.

Raw SQL by necessity (issue 23): the ORM has no `set_config`, `DECLARE`/
`FETCH` or pipeline, and the model's own SELECT is the query being run.
Each statement names its benchmark line: bench/README.md, "sql_tool".
"""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg
from django.conf import settings
from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg import errors
from psycopg.types.numeric import FloatLoader
from psycopg.types.string import TextLoader

from citations.tools import ToolError
from finance.sql_guard import check_select
from finance.sql_values import NUMBER_TOO_LARGE, fetch_rows, first_batch, rows_output, value_too_long
from finance.view_sql import VIEW_NAMES, role_names

#: Types the tool reads as PostgreSQL's ISO text (JSON-ready); bench/sql_tool.py's direct query does the same.
logger = logging.getLogger(__name__)

TEXT_TYPES = ("date", "time", "timetz", "timestamp", "timestamptz", "interval")
_TOO_LARGE_MARK = "silvia: a row past the text cap"


def reader_role(connection: BaseDatabaseWrapper) -> str:
    """The role the tool's queries run as (settings, else `<database>_sql_reader`)."""
    return role_names(
        connection.settings_dict["NAME"], settings.FINANCE_SQL_READER_ROLE, settings.FINANCE_SQL_VIEW_OWNER_ROLE
    )[0]


#: What the model reads when the service's role cannot switch to the reader role (docs/deploying.md#the-runtime-role).
READER_MISSING = (
    "the service cannot run SQL queries right now: its database role may not switch to the SQL tool's reader "
    "role (a setup problem on the server, not in the query)"
)


def reader_membership_problem(connection: BaseDatabaseWrapper) -> str | None:
    """Why the tool's queries cannot run as the reader role, or None: the role the service connects as must be a
    member of `<database>_sql_reader` (docs/deploying.md#the-runtime-role). Names the two roles, nothing else.
    None too before migration 0002 made the role (`is_ready` covers that)."""
    reader = reader_role(connection)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT session_user, EXISTS (SELECT 1 FROM pg_roles WHERE rolname = %s) "
            "AND NOT pg_has_role(session_user, %s, 'MEMBER')",
            [reader, reader],
        )
        role, missing = cursor.fetchone()
    if not missing:
        return None
    return (
        f"the database role {role!r} is not a member of {reader!r} "
        f'(GRANT "{reader}" TO "{role}": docs/deploying.md#the-runtime-role)'
    )


def is_ready(connection: BaseDatabaseWrapper) -> bool:
    """Whether migration 0002 has set this database up (scope table, reader role, views)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT to_regclass('finance_sql_scope') IS NOT NULL AND to_regclass('account_details') IS NOT NULL "
            "AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = %s)",
            [reader_role(connection)],
        )
        row = cursor.fetchone()
    return bool(row and row[0])


def run_query(
    query: str,
    *,
    user_id: int,
    connection: BaseDatabaseWrapper,
    timeout_ms: int,
    max_rows: int,
    max_chars: int,
    max_value_chars: int,
) -> dict[str, Any]:
    """`{"columns", "rows"}` of `query` as user `user_id`; raises `ToolError` (refused, failed, timed out, too big)."""
    statement = check_select(query)
    # The wrapper bounds what the server sends. What goes inside is the one
    # SELECT the guard parsed and accepted, in parentheses: even a second
    # statement could not run there.
    #
    # It also refuses, before the server sends it, a row longer than
    # `max_value_chars` bytes (with room for the row's headers): the cursor
    # below reads rows in batches, but one row could hold a value of hundreds
    # of megabytes. The failing cast is how plain SQL raises (not a constant,
    # which the planner would fold and raise at once); its marker is mapped
    # back to the value cap's error below.
    row_bytes = int(max_value_chars) + 1024
    wrapped = (
        f"SELECT * FROM (\n{statement}\n) AS _silvia_q "  # noqa: S608
        f"WHERE CASE WHEN pg_column_size(_silvia_q.*) > {row_bytes} "
        f"THEN ('{_TOO_LARGE_MARK} ' || pg_column_size(_silvia_q.*))::int END IS NULL "
        f"LIMIT {int(max_rows) + 1}"
    )
    connection.ensure_connection()
    deadline = time.monotonic() + timeout_ms / 1000
    try:
        with transaction.atomic(using=connection.alias):
            raw = connection.connection
            setup, cursor = psycopg.Cursor(raw), psycopg.Cursor(raw)
            # JSON-ready values straight from the wire: numbers as float,
            # dates and times as PostgreSQL's ISO text.
            cursor.adapters.register_loader("numeric", FloatLoader)
            for name in TEXT_TYPES:
                cursor.adapters.register_loader(name, TextLoader)
            first = first_batch(max_rows=max_rows, max_chars=max_chars, max_row_chars=row_bytes)
            try:
                # One round trip (a pipeline): the scope row, then SET LOCAL
                # statement_timeout, standard strings (the server reads
                # literals as the guard's parser did), transaction_read_only
                # and ROLE; the cursor; its first batch. The read-only check of
                # the first statement ran before it began, so its own insert
                # goes through; everything ends with the rollback, which also
                # closes the cursor. cursor_tuple_fraction 1: plan for reading
                # every row, as a plain query would be planned.
                #
                # A server-side cursor in this transaction: rows come in
                # batches and the text cap is checked after each, so a huge
                # result stops before it is in memory (sql_values.fetch_rows).
                # Raw: bench/README.md "sql_tool" (one round trip for scope, settings, cursor, first rows).
                with raw.pipeline():
                    setup.execute(
                        "WITH scope AS (INSERT INTO finance_sql_scope (pid, user_id) VALUES (pg_backend_pid(), %s) "
                        "RETURNING 1) SELECT set_config('statement_timeout', %s, true), "
                        "set_config('standard_conforming_strings', 'on', true), "
                        "set_config('cursor_tuple_fraction', '1', true), "
                        "set_config('transaction_read_only', 'on', true), set_config('role', %s, true) FROM scope",
                        [user_id, str(int(timeout_ms)), reader_role(connection)],
                    )
                    setup.execute(f"DECLARE _silvia_sql NO SCROLL CURSOR FOR {wrapped}")
                    cursor.execute(f"FETCH FORWARD {first} FROM _silvia_sql")
                columns = [column.name for column in cursor.description or ()]
                timeout = [int(timeout_ms)]
                batches = iter([cursor.fetchall()])

                def fetchmany(size: int) -> list[Any]:
                    first_rows = next(batches, None)
                    if first_rows is not None:
                        return first_rows
                    # Each FETCH is a statement with its own statement_timeout:
                    # keep the sum of them within the one limit.
                    left = int((deadline - time.monotonic()) * 1000)
                    if left <= 0:
                        raise errors.QueryCanceled()
                    if left < timeout[0] * 0.9:
                        timeout[0] = left
                        setup.execute("SELECT set_config('statement_timeout', %s, true)", [str(left)])
                    cursor.execute(f"FETCH FORWARD {int(size)} FROM _silvia_sql")  # bench "sql_tool"
                    return cursor.fetchall()

                rows = fetch_rows(fetchmany, max_rows=max_rows, max_chars=max_chars, max_row_chars=row_bytes)
            finally:
                setup.close()
                cursor.close()
            transaction.set_rollback(True, using=connection.alias)
    except errors.QueryCanceled:
        raise ToolError(f"the query ran longer than {timeout_ms / 1000:g} s and was stopped") from None
    except errors.InsufficientPrivilege:
        problem = reader_membership_problem(connection)
        if problem is not None:
            # The operator's setup, not the query: every query fails the same way until it is fixed.
            logger.error("execute_sql refused every query: %s", problem)
            raise ToolError(READER_MISSING) from None
        raise ToolError(f"permission denied: only {', '.join(VIEW_NAMES)} can be read") from None
    except errors.ReadOnlySqlTransaction:
        raise ToolError("the query may only read") from None
    except psycopg.Error as error:
        message = (error.diag.message_primary or "the query failed").splitlines()[0][:300]
        if _TOO_LARGE_MARK in message:
            raise value_too_long(max_value_chars) from None
        raise ToolError(f"error: {message}") from None
    except OverflowError:  # a numeric beyond a float's range (psycopg's float loader)
        raise ToolError(NUMBER_TOO_LARGE) from None
    return rows_output(columns, rows, max_rows=max_rows)
