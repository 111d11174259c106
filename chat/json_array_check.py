"""FROZEN: referenced by migration 0003 (`ai_chat_logs_*_is_array` check constraints). Never change its SQL.

`JsonTypeIsArray(column)` is true when the JSON column holds an array: a
check-constraint condition written per vendor, since Django has no JSON type
lookup that runs on both databases.
"""

from __future__ import annotations

from typing import Any

from django.db import NotSupportedError
from django.db.models import BooleanField, F, Func


class JsonTypeIsArray(Func):
    """`jsonb_typeof(col) = 'array'` on PostgreSQL, `json_type(col) = 'array'` on SQLite."""

    output_field = BooleanField()

    def __init__(self, column: str) -> None:
        super().__init__(F(column))
        self.column = column

    def deconstruct(self) -> Any:
        return ("chat.json_array_check.JsonTypeIsArray", (self.column,), {})

    # Only a refusal: the per-vendor as_postgresql/as_sqlite do the work (the
    # stubs' signature adds parameters this check never takes).
    def as_sql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:  # type: ignore[override]
        raise NotSupportedError(f"JsonTypeIsArray runs on PostgreSQL and SQLite only, not {connection.vendor}")

    def as_postgresql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        sql, params = compiler.compile(self.get_source_expressions()[0])
        return f"jsonb_typeof({sql}) = 'array'", params

    def as_sqlite(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        sql, params = compiler.compile(self.get_source_expressions()[0])
        return f"json_type({sql}) = 'array'", params
