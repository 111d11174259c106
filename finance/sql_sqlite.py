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

import functools
import math
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from typing import Any, NoReturn

from django.db.backends.base.base import BaseDatabaseWrapper

from citations.tools import ToolError
from finance.sql_values import fetch_rows, rows_output, value_too_long
from finance.view_sql import VIEW_NAMES, quote_ident, view_body

CACHE_SECONDS = 60.0
CACHE_USERS = 32
LIKE_PATTERN_CHARS = 200
"""The longest LIKE/GLOB pattern: matching is one call, up to pattern × value steps."""
TRIM_CHARS = 100
"""The most characters `trim(X, Y)` may remove (`Y`): trimming is one call of up to len(X) × len(Y) steps."""
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


# printf's conversions (SQLite's printf.c): flags, a width and a precision
# (digits, or `*` taking the next argument), length modifiers, the type.
_PRINTF_SPEC = re.compile(r"%([-+ 0#!,]*)(\*|\d*)(?:\.(\*|\d*))?(l{0,2})(.?)", re.DOTALL)
_NUMERIC_PREFIX = re.compile(rb"\s*[-+]?(\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+)")


class CallRefused(Exception):
    """A guarded function call the limits refuse; `reason` is shown to the model."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Guards:
    """SQLite's own printf, format and trim family behind checks, installed on one copy.

    A checked call is computed by SQLite on `bare`, a connection of its own
    with nothing in it, so results are SQLite's exactly. A refused call
    raises; `refusal` keeps its reason for the error message (SQLite only
    says "user-defined function raised exception"). Used under the copy's
    lock, one query at a time.
    """

    def __init__(self) -> None:
        self.bare = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self.max_chars = 65_536
        self.deadline = 0.0
        self.timeout_ms = 0
        self.refusal: str | None = None

    def install(self, memory: sqlite3.Connection) -> None:
        for name in ("printf", "format"):
            memory.create_function(name, -1, self._printf(name), deterministic=True)
        for name in ("trim", "ltrim", "rtrim"):
            memory.create_function(name, 1, self._bare(name), deterministic=True)
            memory.create_function(name, 2, self._trim(name), deterministic=True)

    def arm(self, *, deadline: float, timeout_ms: int, max_chars: int) -> None:
        self.deadline, self.timeout_ms, self.max_chars, self.refusal = deadline, timeout_ms, max_chars, None
        self.bare.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_chars)

    def _refuse(self, reason: str) -> NoReturn:
        self.refusal = reason
        raise CallRefused(reason)

    def _call(self, name: str, args: tuple[Any, ...]) -> Any:
        if time.monotonic() > self.deadline:
            self._refuse(f"the query ran longer than {self.timeout_ms / 1000:g} s and was stopped")
        marks = ", ".join("?" * len(args))
        return self.bare.execute(f"SELECT {name}({marks})", args).fetchone()[0]

    def _bare(self, name: str) -> Any:
        return lambda *args: self._call(name, args)

    def _printf(self, name: str) -> Any:
        def call(*args: Any) -> Any:
            template = args[0] if args else None
            if isinstance(template, bytes):  # SQLite reads a blob template as text
                template = template.decode("utf-8", "replace")
            if isinstance(template, str):
                for size in printf_sizes(template, args[1:]):
                    if size > self.max_chars:
                        self._refuse(
                            f"{name}(): a width or precision of {size} is more than {self.max_chars} "
                            "(FINANCE_SQL_MAX_VALUE_CHARS)"
                        )
            return self._call(name, args)

        return call

    def _trim(self, name: str) -> Any:
        def call(value: Any, characters: Any) -> Any:
            if isinstance(characters, (str, bytes)) and len(characters) > TRIM_CHARS:
                self._refuse(f"{name}(): more than {TRIM_CHARS} characters to remove")
            return self._call(name, (value, characters))

        return call


def printf_sizes(template: str, args: tuple[Any, ...]) -> list[int]:
    """Every width and precision of a `printf(template, *args)` call, as SQLite reads them (absolute values).

    A `*` takes the next argument, read as SQLite reads an integer (a
    number's integer part, a text's leading number, else 0).
    """
    sizes: list[int] = []
    for size, position in _printf_specs(template):
        if position is None:
            sizes.append(size)
        else:
            sizes.append(abs(_as_int(args[position] if position < len(args) else None)))
    return sizes


@functools.lru_cache(maxsize=256)
def _printf_specs(template: str) -> tuple[tuple[int, int | None], ...]:
    """A template's widths and precisions: `(digits, None)` for a literal, `(0, argument index)` for a `*`.

    Cached: a query calls printf with one template row after row.
    """
    specs: list[tuple[int, int | None]] = []
    position = 0
    for match in _PRINTF_SPEC.finditer(template):
        width, precision, conversion = match.group(2), match.group(3), match.group(5)
        for part in (width, precision):
            if part == "*":
                specs.append((0, position))
                position += 1
            elif part:
                # Past 18 digits it is past any limit (and int() refuses thousands of digits).
                specs.append((int(part) if len(part) <= 18 else 2**63, None))
        if conversion not in ("%", "n", ""):
            position += 1
    return tuple(specs)


def _as_int(value: Any) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else 2**63
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogatepass")
    if isinstance(value, bytes):
        match = _NUMERIC_PREFIX.match(value)
        if match is None:
            return 0
        number = float(match.group(0))
        return int(number) if math.isfinite(number) else 2**63
    return 0


class _Copy:
    def __init__(self, connection: sqlite3.Connection, version: tuple[Any, ...], guards: _Guards) -> None:
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
    guards = _Guards()
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
