"""One model's table, read through the ORM and written with one raw statement per batch (docs/backfill.md).

The write is raw: bench/orm_vs_raw.py "backfill write" measured `bulk_update`
at twice its time. PostgreSQL takes the batch as one `jsonb_to_recordset`
parameter; SQLite an `UPDATE ... FROM (VALUES ...)` within its parameter limit.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from django.db import connections
from django.db.models import Field, JSONField, Model, QuerySet, TextField
from django.db.models.functions import Cast

if TYPE_CHECKING:
    from chat.backfill import RowPlan

__all__ = ["JSON_FIELDS", "NOT_JSON", "BackfillTable", "chunks"]

JSON_FIELDS = ("citations", "inline_citations")

#: A JSON column's text that is not JSON (a table restored without the check).
NOT_JSON = object()


def _json_field(model: type[Model], name: str) -> JSONField[Any, Any]:
    field = model._meta.get_field(name)
    if not isinstance(field, JSONField):
        raise TypeError(f"{model.__name__}.{name} is not a JSONField")
    return field


def _column(field: Field[Any, Any]) -> str:
    if field.column is None:
        raise TypeError(f"{field.name} has no column")
    return field.column


class BackfillTable:
    """One model's table on one connection (PostgreSQL or SQLite): ORM reads, one raw write per batch."""

    def __init__(self, model: type[Model], alias: str) -> None:
        self.alias = alias
        self.manager = model._default_manager
        self.connection = connections[alias]
        pk = model._meta.pk
        if pk is None:
            raise TypeError(f"{model.__name__} has no primary key")
        self.pk: Field[Any, Any] = pk
        self.json_fields = {name: _json_field(model, name) for name in JSON_FIELDS}
        self.written: list[Field[Any, Any]] = [self.pk, *self.json_fields.values()]
        qn = self.connection.ops.quote_name
        self.table = qn(model._meta.db_table)
        self.pk_column = qn(_column(self.pk))
        self.columns = ", ".join(qn(_column(f)) for f in self.written)
        self.is_postgresql = self.connection.vendor == "postgresql"

    # ids are UUIDs: the ORM reads and writes them in the database's representation.
    def db_id(self, value: uuid.UUID | str) -> uuid.UUID:
        try:
            return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
        except ValueError:
            raise ValueError(f"not a UUID: {value!r}") from None

    def text_id(self, db_value: Any) -> str:
        return str(db_value)

    def decode(self, name: str, raw: Any) -> Any:
        if not isinstance(raw, (str, bytes)):
            return raw  # SQL NULL, or a driver that already decoded it
        try:
            return json.loads(raw, cls=self.json_fields[name].decoder)
        except ValueError:
            # Both databases refuse invalid JSON in these columns (jsonb;
            # Django's JSON_VALID check on SQLite), but a table restored
            # without the check must not stop the run.
            return NOT_JSON

    def encode(self, name: str, value: Any) -> str:
        return json.dumps(value, cls=self.json_fields[name].encoder)

    def _rows(self, after: Any = None) -> QuerySet[Any, tuple[Any, Any, Any]]:
        """(id, citations, inline_citations) in id order, the JSON as its stored text (decoded by `decode`)."""
        rows = self.manager.using(self.alias).order_by("pk")
        if after is not None:
            rows = rows.filter(pk__gt=after)
        return rows.values_list("pk", *(Cast(name, TextField()) for name in JSON_FIELDS))

    def count(self, after: Any) -> int:
        return self._rows(after).count()

    def scan(self, after: Any, limit: int) -> list[tuple[Any, Any, Any]]:
        return list(self._rows(after)[:limit])

    def lock_and_read(self, ids: Sequence[Any]) -> list[tuple[Any, Any, Any]]:
        """Lock these rows (PostgreSQL) and read them as stored now; call inside a transaction."""
        return self.read(ids, lock=True)

    def read(self, ids: Sequence[Any], *, lock: bool = False) -> list[tuple[Any, Any, Any]]:
        """These rows as stored now, in id order (locked `FOR UPDATE` with `lock`)."""
        # Id order: concurrent backfills take their locks in the same order.
        rows: list[tuple[Any, Any, Any]] = []
        for chunk in chunks(ids, self._max_params()):
            chosen = self._rows().filter(pk__in=chunk)
            rows.extend(chosen.select_for_update() if lock else chosen)
        return sorted(rows, key=lambda row: row[0])

    def write(self, plans: list[tuple[Any, RowPlan]]) -> None:
        """Write the two JSON columns of these rows; nothing else."""
        if not plans:
            return
        rows = []
        for row_id, plan in plans:
            citations, inline_citations = plan.lists
            rows.append((row_id, citations.value, inline_citations.value))
        if self.is_postgresql:
            self._write_postgresql(rows)
        else:
            self._write_sqlite(rows)

    def _write_postgresql(self, rows: list[tuple[Any, ...]]) -> None:
        # The whole batch travels as one JSON array of row objects, unpacked
        # by jsonb_to_recordset: one statement and one parameter whatever the
        # batch size. (Arrays per column, `unnest(%s::jsonb[], ...)`, measured
        # 2.5x slower: psycopg quotes array elements in Python when binding
        # client-side, as Django does.)
        names = [_column(f) for f in self.written]
        batch = [dict(zip(names, (str(row[0]), *row[1:]), strict=True)) for row in rows]
        qn = self.connection.ops.quote_name
        definitions = ", ".join(f"{qn(_column(f))} {f.cast_db_type(self.connection)}" for f in self.written)
        assignments = ", ".join(f"{qn(name)} = v.{qn(name)}" for name in names[1:])
        # Raw: bench/orm_vs_raw.py "backfill write" (bulk_update: 2x).
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {self.table} SET {assignments} "  # noqa: S608 - as count(); the batch is one parameter
                f"FROM jsonb_to_recordset(%s::jsonb) AS v({definitions}) "
                f"WHERE {self.table}.{self.pk_column} = v.{self.pk_column}",
                [json.dumps(batch, cls=self.json_fields["citations"].encoder)],
            )

    def _write_sqlite(self, rows: list[tuple[Any, ...]]) -> None:
        # UPDATE ... FROM a VALUES list: one statement per batch unless the
        # batch has more values than SQLite takes parameters.
        qn = self.connection.ops.quote_name
        columns = [qn(_column(f)) for f in self.written]
        assignments = ", ".join(f"{c} = v.{c}" for c in columns[1:])
        row_sql = "(" + ", ".join(["%s"] * len(columns)) + ")"
        prep = self.pk.get_db_prep_value
        encoded = [
            (prep(row[0], self.connection), self.encode("citations", row[1]), self.encode("inline_citations", row[2]))
            for row in rows
        ]
        # Raw: as `_write_postgresql` (bench/orm_vs_raw.py "backfill write").
        with self.connection.cursor() as cursor:
            for chunk in chunks(encoded, max(1, self._max_params() // len(columns))):
                cursor.execute(
                    f"WITH v({', '.join(columns)}) AS (VALUES {', '.join([row_sql] * len(chunk))}) "  # noqa: S608 - as count()
                    f"UPDATE {self.table} SET {assignments} FROM v "
                    f"WHERE {self.table}.{self.pk_column} = v.{self.pk_column}",
                    [value for row in chunk for value in row],
                )

    def _max_params(self) -> int:
        # SQLite's real limit (32766 since 3.32) rather than Django's
        # conservative 999, so that a batch is one statement where possible.
        if self.is_postgresql:
            return 65535  # a protocol limit; a batch is far below it
        self.connection.ensure_connection()
        raw = self.connection.connection
        getlimit = getattr(raw, "getlimit", None)
        if getlimit is not None:
            return getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        return self.connection.features.max_query_params or 999


def chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
