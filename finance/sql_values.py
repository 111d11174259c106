"""Rows from either database as SPEC 4's JSON-safe `{"columns", "rows"}` output."""

from __future__ import annotations

import datetime as dt
import math
import operator
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from itertools import chain, compress, repeat
from typing import Any

from citations.tools import ToolError


def json_safe(value: Any) -> Any:
    """`value` as JSON: decimals as numbers, dates and times as ISO text, non-finite numbers as text.

    Money is a JSON number (a float), as the examples record it; `NaN` and
    infinities are not JSON and become `"NaN"`/`"Infinity"`.
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value).replace("inf", "Infinity").replace("nan", "NaN")
    if isinstance(value, Decimal):
        return float(value) if value.is_finite() else str(value)
    if isinstance(value, (dt.date, dt.time)):  # datetime is a date
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    return str(value)


_PLAIN = frozenset({type(None), bool, int, float, str})


def _floats_finite(flat: list[Any], kinds: list[type]) -> bool:
    """Whether every float in `flat` is finite: their sum is (a NaN or an infinity makes it not; so may an
    overflow of finite values, which only sends the rows through `json_safe`)."""
    try:
        return math.isfinite(sum(compress(flat, map(operator.is_, kinds, repeat(float)))))
    except (OverflowError, ValueError):
        return False


#: Rows of the first batch (PostgreSQL fetches it in the setup's round trip), unless the text cap
#: allows fewer: a result up to this size costs no second round trip (bench/README.md, sql_tool).
FIRST_BATCH = 1024
MAX_BATCH = 4096


def first_batch(*, max_rows: int, max_chars: int, max_row_chars: int) -> int:
    """The size `fetch_rows` asks for first (a caller may fetch it ahead, in the same round trip)."""
    return min(FIRST_BATCH, max(1, 4 * max_chars // max(1, max_row_chars)), max_rows + 1)


NUMBER_TOO_LARGE = "a number in the result is too large for a float (beyond ±1.8e308): round or scale it in SQL"


def value_too_long(max_value_chars: int) -> ToolError:
    """The error past the per-value (SQLite) or per-row (PostgreSQL) cap."""
    return ToolError(f"a value or row is longer than {max_value_chars} characters (FINANCE_SQL_MAX_VALUE_CHARS)")


def too_large(max_chars: int) -> ToolError:
    """The error past the text cap."""
    return ToolError(
        f"the result is too large (more than {max_chars} characters of text): select fewer columns or rows"
    )


def text_chars(rows: Sequence[Sequence[Any]]) -> int:
    """Characters of text in `rows`: strings, and the text form of anything but numbers, booleans and NULL."""
    return _text_and_json_ready(rows)[0]


def _text_and_json_ready(rows: Sequence[Sequence[Any]]) -> tuple[int, bool]:
    """(`text_chars(rows)`, whether every value is already JSON: a plain type, floats finite), in one pass."""
    flat = list(chain.from_iterable(rows))
    kinds = list(map(type, flat))
    if set(kinds) <= _PLAIN:
        return sum(map(len, compress(flat, map(operator.is_, kinds, repeat(str))))), _floats_finite(flat, kinds)
    chars = sum(
        len(value) if kind is str else 2 * len(value) if kind is bytes else len(str(value))
        for value, kind in zip(flat, kinds, strict=True)
        if kind not in _NUMBERS
    )
    return chars, False


_NUMBERS = frozenset({type(None), bool, int, float})


@dataclass(frozen=True, slots=True)
class FetchedRows:
    """What `fetch_rows` read: the rows, and whether every value in them is already JSON (for `rows_output`)."""

    rows: list[Any]
    json_ready: bool


def fetch_rows(
    fetchmany: Callable[[int], Sequence[Any]], *, max_rows: int, max_chars: int, max_row_chars: int
) -> FetchedRows:
    """All rows from `fetchmany`, in batches; `ToolError` as soon as the row or text cap is passed.

    Memory stays near the caps whatever the query. The text is counted after
    each batch, and a batch is never more rows than, at `max_row_chars` (the
    database's cap on one row or value) each, four times the text still
    allowed. Within that, a batch grows (x8, then x2, up to `MAX_BATCH` rows)
    while the last one held little of the text still allowed, and halves
    when it held much or when its rows grew (its last row more than twice
    its first, past 64 characters), so a recursive CTE doubling a string is
    read a row or two at a time and stops just past the cap.
    """
    rows: list[Any] = []
    chars = 0
    json_ready = True
    size = FIRST_BATCH
    while True:
        remaining = max_chars - chars
        want = min(size, max(1, 4 * remaining // max(1, max_row_chars)), max_rows + 1 - len(rows))
        batch = fetchmany(want)
        rows.extend(batch)
        if len(rows) > max_rows:
            raise ToolError(f"the query returned more than {max_rows} rows: aggregate, filter or add LIMIT")
        batch_chars, batch_ready = _text_and_json_ready(batch)
        json_ready = json_ready and batch_ready
        chars += batch_chars
        if chars > max_chars:
            raise too_large(max_chars)
        if len(batch) < want:  # the result is exhausted
            return FetchedRows(rows, json_ready)
        remaining = max_chars - chars
        growing = batch_chars > 64 * len(batch) and text_chars(batch[-1:]) > 2 * max(64, text_chars(batch[:1]))
        if growing or batch_chars * 4 > remaining:
            size = max(1, len(batch) // 2)
        elif batch_chars * 512 <= remaining:
            size = min(len(batch) * 8, MAX_BATCH)
        elif batch_chars * 64 <= remaining:
            size = min(len(batch) * 2, MAX_BATCH)


def rows_output(columns: Sequence[str], fetched: FetchedRows, *, max_rows: int, finite: bool = False) -> dict[str, Any]:
    """`{"columns": [...], "rows": [{column: value, ...}, ...]}` of rows read by `fetch_rows`.

    `ToolError` on a repeated column name, past `max_rows`, or (`finite`: a
    database whose only infinities are overflows, SQLite) on a non-finite
    float. The text cap was checked while fetching, and whether the values
    need converting was found in the same pass.
    """
    seen: set[str] = set()
    for name in columns:
        if name in seen:
            raise ToolError(f"two result columns are named {name!r}: give each a distinct name with AS")
        seen.add(name)
    rows = fetched.rows
    if len(rows) > max_rows:
        raise ToolError(f"the query returned more than {max_rows} rows: aggregate, filter or add LIMIT")
    if fetched.json_ready:
        # The common case, at C speed: every value is already JSON.
        return {"columns": list(columns), "rows": [dict(zip(columns, row, strict=True)) for row in rows]}
    flat = list(chain.from_iterable(rows))
    kinds = list(map(type, flat))
    if finite and not all(map(math.isfinite, compress(flat, map(operator.is_, kinds, repeat(float))))):
        raise ToolError(NUMBER_TOO_LARGE)
    converted = [[json_safe(value) for value in row] for row in rows]
    return {"columns": list(columns), "rows": [dict(zip(columns, row, strict=True)) for row in converted]}
