"""Rows from either database as SPEC 4's JSON-safe `{"columns", "rows"}` output."""

from __future__ import annotations

import datetime as dt
import math
import operator
import uuid
from collections.abc import Sequence
from decimal import Decimal
from itertools import chain, compress, repeat
from typing import Any

from chat.tools.base import ToolError


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
    floats = list(compress(flat, map(operator.is_, kinds, repeat(float))))
    try:
        return math.isfinite(math.fsum(floats))  # one NaN or infinity makes the sum non-finite
    except (OverflowError, ValueError):
        return False


def rows_output(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], *, max_rows: int, max_chars: int
) -> dict[str, Any]:
    """`{"columns": [...], "rows": [{column: value}, ...]}`; `ToolError` past the caps or on a repeated column name.

    `rows` may hold one row more than `max_rows` (the fetch asks for one more
    to know whether the cap was passed). `max_chars` bounds the total length
    of the text values.
    """
    seen: set[str] = set()
    for name in columns:
        if name in seen:
            raise ToolError(f"two result columns are named {name!r}: give each a distinct name with AS")
        seen.add(name)
    if len(rows) > max_rows:
        raise ToolError(f"the query returned more than {max_rows} rows: aggregate, filter or add LIMIT")
    flat = list(chain.from_iterable(rows))
    kinds = list(map(type, flat))
    if set(kinds) <= _PLAIN and _floats_finite(flat, kinds):
        # The common case, at C speed: every value is already JSON.
        chars = sum(map(len, compress(flat, map(operator.is_, kinds, repeat(str)))))
        out = [dict(zip(columns, row, strict=True)) for row in rows]
    else:
        converted = [[json_safe(value) for value in row] for row in rows]
        chars = sum(
            len(value) if isinstance(value, str) else len(str(value))
            for row in converted
            for value in row
            if isinstance(value, (str, list, dict))
        )
        out = [dict(zip(columns, row, strict=True)) for row in converted]
    if chars > max_chars:
        raise ToolError(
            f"the result is too large (more than {max_chars} characters of text): select fewer columns or rows"
        )
    return {"columns": list(columns), "rows": out}
