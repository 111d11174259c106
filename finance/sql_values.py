"""Rows from either database as SPEC 4's JSON-safe `{"columns", "rows"}` output."""
from __future__ import annotations

import datetime as dt
import math
import uuid
from collections.abc import Sequence
from decimal import Decimal
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


def rows_output(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, max_rows: int, max_chars: int) -> dict[str, Any]:
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
    chars = 0
    out = []
    for row in rows:
        values = []
        for value in row:
            kind = type(value)
            if kind is str:
                chars += len(value)
            elif kind is not int and value is not None and kind is not bool:
                value = json_safe(value)
                if isinstance(value, str):
                    chars += len(value)
                elif isinstance(value, list):
                    chars += len(str(value))
            values.append(value)
        out.append(dict(zip(columns, values, strict=True)))
    if chars > max_chars:
        raise ToolError(f"the result is too large (more than {max_chars} characters of text): select fewer columns or rows")
    return {"columns": list(columns), "rows": out}
