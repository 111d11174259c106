"""The `execute_sql` tool: the model's SQL over the caller's financial data (SPEC 4, 13).

`ExecuteSqlTool().run({"query": ...}, user=...)` returns
`{"columns": [...], "rows": [{column: value}, ...]}` with JSON-safe values, or
raises `ToolError` with a short reason for the model. The query sees only the
three views and only `user`'s rows, on PostgreSQL (`finance.sql_postgres`:
role, row-level security, read-only transaction) and SQLite
(`finance.sql_sqlite`: a private copy of the user's rows). Limits come from
settings (`FINANCE_SQL_TIMEOUT_MS`, `FINANCE_SQL_MAX_ROWS`,
`FINANCE_SQL_MAX_CHARS`, `FINANCE_SQL_MAX_VALUE_CHARS`). Nothing of a query, its rows or its errors is logged.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from citations.citable import EXECUTE_SQL
from citations.tools import ToolError
from finance import sql_postgres, sql_sqlite

logger = logging.getLogger(__name__)

MAX_QUERY_CHARS = 20_000

#: The account's id and label columns, first in each of the three views (docs/sql-tool.md).
_ACCOUNT_COLUMNS: tuple[str, ...] = (
    "source",
    "source_account_id",
    "account_id",
    "snaptrade_account_id",
    "manual_account_uuid",
    "account_uuid",
    "account_name",
    "account_display_name",
    "account_official_name",
    "institution_name",
)

VIEW_COLUMNS: dict[str, tuple[str, ...]] = {
    "account_details": (
        *_ACCOUNT_COLUMNS,
        "official_name",
        "type",
        "subtype",
        "mask",
        "currency",
        "current_balance",
        "available_balance",
        "credit_limit",
        "purchase_apr",
        "interest_rate",
        "origination_date",
        "monthly_payment",
        "escrow_payment",
        "escrow_balance",
        "remaining_term_months",
        "contributions_ytd",
        "updated_at",
        "clerk_id",
        "item_id",
        "access_token",
    ),
    "holding_details": (
        *_ACCOUNT_COLUMNS,
        "account_type",
        "ticker",
        "security_name",
        "security_type",
        "quantity",
        "institution_price",
        "institution_value",
        "cost_basis",
        "currency",
        "updated_at",
        "clerk_id",
        "item_id",
    ),
    "public_holding_details": (
        *_ACCOUNT_COLUMNS,
        "ticker",
        "security_name",
        "security_type",
        "exchange",
        "quantity",
        "close_price",
        "close_price_as_of",
        "market_value",
        "institution_value",
        "currency",
        "clerk_id",
    ),
}
"""The columns of each view, in order (a test ties them to the database)."""

_DESCRIPTION = """Run one read-only SQL SELECT over the user's own financial data and get its rows.
Only these views exist (the user's rows only):
{views}
Types: account type is depository, credit, loan, investment, property or crypto;
rates and APRs are percents; money is in the row's currency.
When you read accounts, select source and source_account_id with the account_name,
so your citations link to the account.
One statement, SELECT only, at most {rows} rows, {seconds:g} s. Common aggregate, math, text and date functions work."""


class ExecuteSqlTool:
    """The `execute_sql` tool executor (`citations.tools.ToolExecutor`)."""

    name = EXECUTE_SQL.name

    def __init__(
        self,
        *,
        using: str = DEFAULT_DB_ALIAS,
        timeout_ms: int | None = None,
        max_rows: int | None = None,
        max_chars: int | None = None,
        max_value_chars: int | None = None,
    ) -> None:
        self.using = using
        self.timeout_ms = timeout_ms if timeout_ms is not None else settings.FINANCE_SQL_TIMEOUT_MS
        self.max_rows = max_rows if max_rows is not None else settings.FINANCE_SQL_MAX_ROWS
        self.max_chars = max_chars if max_chars is not None else settings.FINANCE_SQL_MAX_CHARS
        self.max_value_chars = max_value_chars if max_value_chars is not None else settings.FINANCE_SQL_MAX_VALUE_CHARS

    def definition(self) -> dict[str, Any]:
        """The Messages API tool definition: `{"name", "description", "input_schema"}`."""
        views = "\n".join(f"- {name}({', '.join(columns)})" for name, columns in VIEW_COLUMNS.items())
        return EXECUTE_SQL.definition(
            _DESCRIPTION.format(views=views, rows=self.max_rows, seconds=self.timeout_ms / 1000)
        )

    def run(self, tool_input: dict[str, Any], *, user: Any) -> dict[str, Any]:
        """Run `tool_input["query"]` as `user`; SPEC 4's `{"columns", "rows"}` or `ToolError`."""
        query = tool_input.get("query") if isinstance(tool_input, dict) else None
        if not isinstance(query, str) or not query.strip():
            raise ToolError("input.query: expected a non-empty SQL string")
        if len(query) > MAX_QUERY_CHARS:
            raise ToolError(f"input.query: longer than {MAX_QUERY_CHARS} characters")
        if "\x00" in query:
            raise ToolError("input.query: contains a NUL character")
        try:
            query.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolError("input.query: not valid Unicode text (a lone surrogate)") from None
        user_id = getattr(user, "pk", None)
        if not isinstance(user_id, int) or not getattr(user, "is_authenticated", False):
            raise ToolError("no signed-in user to run the query for")
        connection = connections[self.using]
        runner = sql_postgres.run_query if connection.vendor == "postgresql" else sql_sqlite.run_query
        started = time.perf_counter()
        output = runner(
            query,
            user_id=user_id,
            connection=connection,
            timeout_ms=self.timeout_ms,
            max_rows=self.max_rows,
            max_chars=self.max_chars,
            max_value_chars=self.max_value_chars,
        )
        logger.debug("execute_sql: %d rows in %.1f ms", len(output["rows"]), (time.perf_counter() - started) * 1000)
        return output


#: The databases found ready for the tool, by (alias, database, reader role): each turn's tool list is built at
#: its start, and a database once set up (migration 0002) stays so; one not ready is asked again next time.
_ready: set[tuple[str, str, str]] = set()


def execute_sql_tool(*, using: str = DEFAULT_DB_ALIAS) -> ExecuteSqlTool | None:
    """The tool for live turns, or `None` when the database cannot run it safely (views or roles missing).
    Readiness is read from the database until it is found, then remembered by this process (`_ready`)."""
    connection = connections[using]
    try:
        if connection.vendor == "postgresql":
            key = (using, str(connection.settings_dict["NAME"]), sql_postgres.reader_role(connection))
            ready = key in _ready or sql_postgres.is_ready(connection)
            if ready:
                _ready.add(key)
        elif connection.vendor == "sqlite":
            ready = "account_details" in connection.introspection.table_names(include_views=True)
        else:
            ready = False
    except Exception:  # an unreachable database: no tool rather than a failed turn
        logger.warning("execute_sql unavailable: the database did not answer")
        return None
    return ExecuteSqlTool(using=using) if ready else None
