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
"""
from __future__ import annotations

from typing import Any

import psycopg
from django.conf import settings
from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg import errors
from psycopg.types.numeric import FloatLoader
from psycopg.types.string import TextLoader
from pglast import parse_sql

from chat.tools.base import ToolError
from finance.sql_guard import check_select
from finance.sql_values import rows_output
from finance.view_sql import VIEW_NAMES, quote_ident, role_names

_TEXT_TYPES = ("date", "time", "timetz", "timestamp", "timestamptz", "interval")


def reader_role(connection: BaseDatabaseWrapper) -> str:
    """The role the tool's queries run as (settings, else `<database>_sql_reader`)."""
    return role_names(connection.settings_dict["NAME"], settings.FINANCE_SQL_READER_ROLE, settings.FINANCE_SQL_VIEW_OWNER_ROLE)[0]


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


def statement_text(query: str) -> str:
    """The one statement of `query` without its trailing `;` (byte offsets: the parser counts UTF-8 bytes)."""
    raw = parse_sql(query)[0]
    data = query.encode("utf-8")
    start = raw.stmt_location or 0
    end = start + raw.stmt_len if raw.stmt_len else len(data)
    return data[start:end].decode("utf-8")


def run_query(
    query: str, *, user_id: int, connection: BaseDatabaseWrapper, timeout_ms: int, max_rows: int, max_chars: int
) -> dict[str, Any]:
    """`{"columns", "rows"}` of `query` as user `user_id`; raises `ToolError` (refused, failed, timed out, too big)."""
    check_select(query)
    # The wrapper bounds what the server sends; the statement is inside
    # parentheses, so even a second statement could not run (the guard
    # refuses one anyway).
    wrapped = f"SELECT * FROM (\n{statement_text(query)}\n) AS _silvia_q LIMIT {int(max_rows) + 1}"
    connection.ensure_connection()
    try:
        with transaction.atomic(using=connection.alias):
            raw = connection.connection
            cursor = psycopg.Cursor(raw)
            try:
                cursor.execute("INSERT INTO finance_sql_scope (pid, user_id) VALUES (pg_backend_pid(), %s)", [user_id])
                cursor.execute(
                    "SELECT set_config('statement_timeout', %s, true), set_config('transaction_read_only', 'on', true)",
                    [str(int(timeout_ms))],
                )
                cursor.execute(f"SET LOCAL ROLE {quote_ident(reader_role(connection))}")
                # JSON-ready values straight from the wire: numbers as float,
                # dates and times as PostgreSQL's ISO text.
                cursor.adapters.register_loader("numeric", FloatLoader)
                for name in _TEXT_TYPES:
                    cursor.adapters.register_loader(name, TextLoader)
                cursor.execute(wrapped)
                columns = [column.name for column in cursor.description or ()]
                rows = cursor.fetchall()
            finally:
                cursor.close()
            transaction.set_rollback(True, using=connection.alias)
    except errors.QueryCanceled:
        raise ToolError(f"the query ran longer than {timeout_ms / 1000:g} s and was stopped") from None
    except errors.InsufficientPrivilege:
        raise ToolError(f"permission denied: only {', '.join(VIEW_NAMES)} can be read") from None
    except errors.ReadOnlySqlTransaction:
        raise ToolError("the query may only read") from None
    except psycopg.Error as error:
        message = (error.diag.message_primary or "the query failed").splitlines()[0][:300]
        raise ToolError(f"error: {message}") from None
    return rows_output(columns, rows, max_rows=max_rows, max_chars=max_chars)
