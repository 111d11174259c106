"""Running one SELECT as a user on SQLite (SPEC 13).

The query never touches the project's database file. It runs on a private
in-memory database that holds only the caller's rows of the three views
(copied from the views' own SQL with a user filter), so no SQL can reach
anyone else's data: there is none to reach. On that connection an
authorizer allows reading those tables and calling allowlisted functions
only (no writes, PRAGMA, ATTACH, schema tables), a progress handler stops
the query at the time limit, and SQLite's length limit bounds any one value.

The progress handler runs between VDBE steps, never inside one function
call, so every call must be short too (docs/sql-tool.md#every-call-ends-by-its-limit):
`printf`/`format` refuse a width or precision above the value limit (one
`%.*c` with precision 2,000,000,000 loops that many times, whatever the
length limit), `trim`/`ltrim`/`rtrim` refuse a set of more than `TRIM_CHARS`
characters (each character of the value is compared with each of the set),
LIKE and GLOB patterns are capped at `LIKE_PATTERN_CHARS`, and the handler
runs every `PROGRESS_STEPS` steps. `zeroblob`, `randomblob` and the like are
not allowlisted at all.

Copies are cached per (database, user) and rebuilt when the user's rows
change (row counts and latest `updated_at` of each table, checked with one
query per call) or after `CACHE_SECONDS`; each copy is used by one thread at a
time.

Raw SQL by necessity (issue 23): the copy lives in a private `sqlite3`
connection the ORM does not know, and the view bodies are the views' own
SQL. Measured by bench/README.md, "sql_tool" (SQLite lines, cold copy too).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import OrderedDict
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

from citations.tools import ToolError
from finance.sql_sqlite_calls import CallGuards
from finance.sql_values import fetch_rows, rows_output, value_too_long
from finance.view_sql import VIEW_NAMES, quote_ident, view_body

CACHE_SECONDS = 60.0
CACHE_USERS = 32
LIKE_PATTERN_CHARS = 200
"""The longest LIKE/GLOB pattern: matching is one call, up to pattern × value steps."""
PROGRESS_STEPS = 100
"""VDBE steps between two checks of the deadline: about 100 short calls at most."""

ALLOWED_FUNCTIONS: frozenset[str] = frozenset(
    """
    count sum total avg min max group_concat string_agg abs round coalesce ifnull iif nullif
    lower upper length substr substring trim ltrim rtrim replace instr printf format
    date time datetime julianday strftime unixepoch like glob ceil ceiling floor trunc sqrt pow power
    exp ln log log10 log2 mod sign row_number rank dense_rank percent_rank cume_dist ntile lag lead
    first_value last_value nth_value
    """.split()  # noqa: SIM905
)
"""SQLite functions a query may call (aggregates, windows, math, text, dates; LIKE and GLOB are functions too)."""

_VERSION_SQL = """SELECT
    (SELECT count(*) || '/' || coalesce(max(updated_at), '') FROM finance_connection WHERE user_id = ?),
    (SELECT count(*) || '/' || coalesce(max(updated_at), '') FROM finance_account WHERE user_id = ?),
    (SELECT count(*) || '/' || coalesce(max(updated_at), '') FROM finance_holding WHERE user_id = ?),
    (SELECT count(*) || '/' || coalesce(max(updated_at), '') FROM finance_security)"""


class _Copy:
    def __init__(self, connection: sqlite3.Connection, version: tuple[Any, ...], guards: CallGuards) -> None:
        self.connection = connection
        self.version = version
        self.guards = guards
        self.built = time.monotonic()
        self.lock = threading.Lock()


_copies: OrderedDict[tuple[str, int], _Copy] = OrderedDict()
_copies_lock = threading.Lock()


def clear_cache() -> None:
    """Forget every cached copy (tests; after bulk writes that bypass `updated_at`)."""
    with _copies_lock:
        _copies.clear()


def _authorize(action: int, arg1: str | None, arg2: str | None, database: str | None, source: str | None) -> int:
    if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE):
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_READ:
        # The copy holds nothing but the caller's three tables (and the query's
        # own CTEs); only SQLite's schema tables are off limits.
        return sqlite3.SQLITE_DENY if (arg1 or "").lower().startswith("sqlite_") else sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_OK if (arg2 or "").lower() in ALLOWED_FUNCTIONS else sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_DENY


def _build(connection: BaseDatabaseWrapper, user_id: int, version: tuple[Any, ...]) -> _Copy:
    memory = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    with connection.cursor() as cursor:
        for name in VIEW_NAMES:
            cursor.execute(view_body(name, user_filter="a.user_id = %s"), [user_id])
            columns = [column[0] for column in cursor.description]
            memory.execute(f"CREATE TABLE {name} ({', '.join(quote_ident(c) for c in columns)})")
            marks = ", ".join("?" * len(columns))
            memory.executemany(f"INSERT INTO {name} VALUES ({marks})", cursor.fetchall())  # noqa: S608 - our names
    # Only now lock the connection down: reads of the three tables, no
    # writes, no ATTACH, the long-running built-ins guarded (the length
    # limit is set per call).
    memory.set_authorizer(_authorize)
    memory.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    guards = CallGuards()
    guards.install(memory)
    return _Copy(memory, version, guards)


def _copy_for(connection: BaseDatabaseWrapper, user_id: int) -> _Copy:
    # Straight on the driver: this runs on every call and needs none of
    # Django's cursor wrapping.
    connection.ensure_connection()
    version = tuple(connection.connection.execute(_VERSION_SQL, [user_id] * 3).fetchone() or ())
    key = (str(connection.settings_dict["NAME"]), user_id)
    with _copies_lock:
        copy = _copies.get(key)
        if copy is not None and copy.version == version and time.monotonic() - copy.built < CACHE_SECONDS:
            _copies.move_to_end(key)
            return copy
    copy = _build(connection, user_id, version)
    with _copies_lock:
        _copies[key] = copy
        _copies.move_to_end(key)
        while len(_copies) > CACHE_USERS:
            _copies.popitem(last=False)
    return copy


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
    """`{"columns", "rows"}` of `query` over user `user_id`'s rows only; raises `ToolError`."""
    if _is_explain(query):
        raise ToolError("only SELECT is allowed, not EXPLAIN")
    copy = _copy_for(connection, user_id)
    # A copy serves one query at a time. Every query ends by its own deadline,
    # so the wait is bounded; past our own limit, the user gets an error, not a hang.
    if not copy.lock.acquire(timeout=timeout_ms / 1000):
        raise ToolError(f"another query of yours is still running (each may run {timeout_ms / 1000:g} s)")
    deadline = time.monotonic() + timeout_ms / 1000
    try:
        memory = copy.connection
        # One value (a string, a blob, a row being sorted) may not pass this:
        # it keeps any one function call (instr, replace, printf) short, since
        # the progress handler only runs between VDBE steps.
        value_limit = max(1000, max_value_chars)
        memory.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, value_limit)
        memory.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, LIKE_PATTERN_CHARS)
        copy.guards.arm(deadline=deadline, timeout_ms=timeout_ms, max_chars=value_limit)
        memory.set_progress_handler(lambda: int(time.monotonic() > deadline), PROGRESS_STEPS)
        try:
            cursor = memory.execute(query)
            columns = [column[0] for column in cursor.description or ()]
            if not columns:
                raise ToolError("only SELECT is allowed")
            rows = fetch_rows(cursor.fetchmany, max_rows=max_rows, max_chars=max_chars, max_row_chars=max_value_chars)
            cursor.close()
        except sqlite3.DatabaseError as error:
            if copy.guards.refusal is not None:
                raise ToolError(copy.guards.refusal) from None
            raise ToolError(_reason(error, timeout_ms, max_value_chars)) from None
        except sqlite3.Warning:  # "You can only execute one statement at a time."
            raise ToolError("exactly one statement is allowed") from None
        except ValueError as error:
            raise ToolError(f"error: {str(error)[:300]}") from None
        finally:
            memory.set_progress_handler(None, 0)
            if memory.in_transaction:
                memory.rollback()
    finally:
        copy.lock.release()
    return rows_output(columns, rows, max_rows=max_rows, finite=True)


_SPACE = " \t\n\f\r"


def _is_explain(query: str) -> bool:
    """Whether the statement's first keyword, past whitespace and comments, is EXPLAIN (as SQLite reads it)."""
    at = 0
    while True:
        while at < len(query) and query[at] in _SPACE:
            at += 1
        if query.startswith("--", at):
            end = query.find("\n", at)
            at = len(query) if end < 0 else end + 1
        elif query.startswith("/*", at):
            end = query.find("*/", at + 2)
            at = len(query) if end < 0 else end + 2
        else:
            break
    word = query[at : at + 8]
    return word[:7].lower() == "explain" and not (word[7:].isalnum() or word[7:] in ("_", "$"))


def _reason(error: sqlite3.DatabaseError, timeout_ms: int, max_value_chars: int) -> str:
    message = str(error).splitlines()[0][:300] if str(error) else "the query failed"
    if message == "interrupted":
        return f"the query ran longer than {timeout_ms / 1000:g} s and was stopped"
    if message == "string or blob too big":
        return value_too_long(max_value_chars).reason
    if message == "not authorized" or message.startswith("not authorized") or "prohibited" in message:
        return f"not allowed: only SELECT over {', '.join(VIEW_NAMES)} with common functions"
    if message.startswith("no such table"):
        return f"{message}: only {', '.join(VIEW_NAMES)} can be read"
    return f"error: {message}"
