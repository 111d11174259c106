"""The SQLite SQL tool's guarded calls: `printf`/`format` and the trim family checked before SQLite runs them.

The progress handler runs between VDBE steps, never inside one function
call, so every call must be short too (docs/sql-tool.md#every-call-ends-by-its-limit);
`finance.sql_sqlite` installs `CallGuards` on each private copy.
"""

from __future__ import annotations

import functools
import math
import re
import sqlite3
import time
from typing import Any, NoReturn

__all__ = ["TRIM_CHARS", "CallGuards", "CallRefused", "printf_sizes"]

TRIM_CHARS = 100
"""The most characters `trim(X, Y)` may remove (`Y`): trimming is one call of up to len(X) × len(Y) steps."""


# printf's conversions (SQLite's printf.c): flags, a width and a precision
# (digits, or `*` taking the next argument), length modifiers, the type.
_PRINTF_SPEC = re.compile(r"%([-+ 0#!,]*)(\*|\d*)(?:\.(\*|\d*))?(l{0,2})(.?)", re.DOTALL)
_NUMERIC_PREFIX = re.compile(rb"\s*[-+]?(\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+)")


class CallRefused(Exception):
    """A guarded function call the limits refuse; `reason` is shown to the model."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CallGuards:
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
