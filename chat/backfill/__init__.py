"""Typing old `ai_chat_logs` rows in primary-key batches (docs/backfill.md).

`backfill_citation_targets` is the one code path behind the data migration
`chat/migrations/0002_backfill_citation_targets.py` and
`python manage.py backfill_citation_targets`. It takes the model class so
that the migration can pass its historical model (`apps.get_model`). It
reads through the ORM (`values_list`, the JSON as its stored text, so no
model is instantiated), and writes each batch with one raw statement: the
ORM's `bulk_update` builds a `CASE` with every value quoted in Python and
measured twice the time of the raw write for the same rows
(bench/orm_vs_raw.py, "backfill write").

One batch, at most `batch_size` rows in primary-key order after the last one:

1. Scan without locks: read `id, citations, inline_citations` and work out in
   Python which rows the rule changes. A row that needs nothing is never
   locked nor written, so a second run only reads.
2. In one transaction: lock the rows that need a change (`SELECT ... FOR
   UPDATE` by id on PostgreSQL), re-read them, recompute from what is stored
   now, and write the rows that still change with one `UPDATE` (PostgreSQL:
   `UPDATE ... FROM jsonb_to_recordset(...)`; SQLite: `UPDATE ... FROM (VALUES ...)` in
   as few statements as its parameter limit allows). A writer that committed
   between the scan and the lock is therefore never overwritten with stale
   JSON; one that holds the row makes the batch wait for it.

The only columns written are `citations` and `inline_citations` (the admin
computes its counts and filters from them, issue 12). Within the JSON,
an entry that gets a target keeps every key and value, in order, with
`"target"` appended last (PostgreSQL's jsonb keeps its own key order);
entries that get none are written back as read.

A row is malformed when either column is not a JSON list of objects (SQL or
JSON null, an object, a string such as double-encoded JSON, a list holding a
non-object, or text that is not JSON). It is skipped whole, even when the
other column could be typed, and reported by id: a half-typed row would
look repaired to readers while it still needs a person to look at it.

Each batch commits on its own, and the rule is idempotent, so a run stopped
at any point and started again (from the beginning, or `after` the last
reported id) finishes the job.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, transaction
from django.db.models import Model

from chat.backfill.table import JSON_FIELDS, NOT_JSON, BackfillTable, chunks
from citations.backfill import CitationListBackfill, backfill_citation_list

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "BackfillReport",
    "MalformedRow",
    "backfill_citation_targets",
    "count_rows_to_scan",
]

DEFAULT_BATCH_SIZE = 1000
"""Rows per batch: short transactions and locks (milliseconds), few round trips."""


@dataclass(frozen=True, slots=True)
class MalformedRow:
    """A row skipped because a JSON column is not a list of objects."""

    id: str
    reason: str  # e.g. "citations is null", "inline_citations holds a non-object"


@dataclass(slots=True)
class BackfillReport:
    """What a run did so far (updated after each committed batch).

    Rows: `rows_scanned` read, `rows_changed` written (with `dry_run`: that
    would be written). Entries, counted over `citations` and
    `inline_citations` together, of the rows that are not malformed:
    `typed` (kind -> targets added), `already_typed` (had a `target` key,
    whatever it held, and were left alone), `left_untyped` (their source
    determines nothing). `malformed` lists the skipped rows in id order.
    `last_id` is the id of the last row of the last committed batch (pass it
    as `after` to resume); `finished` is False when `max_batches` stopped the
    run before the end of the table.
    """

    dry_run: bool = False
    batches: int = 0
    rows_scanned: int = 0
    rows_changed: int = 0
    typed: Counter[str] = field(default_factory=Counter)
    already_typed: int = 0
    left_untyped: int = 0
    malformed: list[MalformedRow] = field(default_factory=list)
    last_id: str | None = None
    finished: bool = False

    @property
    def typed_total(self) -> int:
        return sum(self.typed.values())


@dataclass(frozen=True, slots=True)
class RowPlan:
    """One row worked out in Python: the malformed reason, or both lists."""

    malformed: str | None
    citations: CitationListBackfill | None = None
    inline_citations: CitationListBackfill | None = None

    @property
    def lists(self) -> tuple[CitationListBackfill, CitationListBackfill]:
        """Both columns' results; only a row that is not malformed has them."""
        if self.citations is None or self.inline_citations is None:
            raise ValueError(f"a malformed row has no citation lists: {self.malformed}")
        return self.citations, self.inline_citations

    @property
    def changed(self) -> bool:
        return self.malformed is None and any(result.changed for result in self.lists)


def backfill_citation_targets(
    *,
    model: type[Model],
    batch_size: int = DEFAULT_BATCH_SIZE,
    after: uuid.UUID | str | None = None,
    dry_run: bool = False,
    max_batches: int | None = None,
    on_batch: Callable[[BackfillReport], None] | None = None,
    using: str = DEFAULT_DB_ALIAS,
) -> BackfillReport:
    """Add the targets a citation's `source` alone determines to the rows of
    `model`'s table (docs/backfill.md), in primary-key batches.

    `model` is `chat.models.ChatLog` or the migration's historical model: any
    model with a UUID primary key and the two JSON fields. Rows are visited in primary-key order,
    starting after `after` (a UUID or its text) when given. `dry_run` reads
    and counts but locks and writes nothing. `max_batches` stops after that
    many batches (`report.finished` is then False unless the table ended).
    `on_batch(report)` is called after each committed batch, with the running
    report; an exception it raises stops the run, the batches before it
    staying committed.

    Memory is bounded by one batch. Raises `ValueError` for a `batch_size` or
    `max_batches` below 1 or an `after` that is not a UUID; database errors
    propagate (the failing batch is rolled back, earlier ones stay).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    if max_batches is not None and max_batches < 1:
        raise ValueError(f"max_batches must be at least 1, not {max_batches}")
    table = BackfillTable(model, using)
    report = BackfillReport(dry_run=dry_run)
    cursor_id = table.db_id(after) if after is not None else None
    while max_batches is None or report.batches < max_batches:
        scanned = table.scan(cursor_id, batch_size)
        if not scanned:
            report.finished = True
            break
        _run_batch(table, scanned, report, dry_run=dry_run)
        cursor_id = scanned[-1][0]
        report.batches += 1
        report.last_id = table.text_id(cursor_id)
        if len(scanned) < batch_size:
            report.finished = True
        if settings.DEBUG:
            # With DEBUG on, Django keeps the SQL of the last 9000 queries, and
            # a write's SQL holds a whole batch of JSON: keep memory to one batch.
            table.connection.queries_log.clear()
        if on_batch is not None:
            on_batch(report)
        if report.finished:
            break
    return report


def backfill_rows(
    *,
    model: type[Model],
    ids: Iterable[uuid.UUID | str],
    batch_size: int = DEFAULT_BATCH_SIZE,
    using: str = DEFAULT_DB_ALIAS,
) -> BackfillReport:
    """The same backfill as `backfill_citation_targets`, on the rows with these ids only
    (the admin's "Recompute targets from sources" action).

    Ids that are not UUIDs or match no row are ignored; repeats count once.
    Batches of `batch_size` rows, each locked, re-read and written as in a
    whole-table run. Returns the report of what it did.
    """
    table = BackfillTable(model, using)
    wanted = sorted({parsed for parsed in (_uuid_or_none(value) for value in ids) if parsed is not None})
    report = BackfillReport(dry_run=False)
    for chunk in chunks([table.db_id(value) for value in wanted], batch_size):
        scanned = table.read(chunk)
        if scanned:
            _run_batch(table, scanned, report, dry_run=False)
            report.batches += 1
            report.last_id = table.text_id(scanned[-1][0])
    report.finished = True
    return report


def _uuid_or_none(value: uuid.UUID | str) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def count_rows_to_scan(
    *, model: type[Model], after: uuid.UUID | str | None = None, using: str = DEFAULT_DB_ALIAS
) -> int:
    """The number of rows a run starting `after` that id would scan (for progress bars).

    Raises `ValueError` for an `after` that is not a UUID.
    """
    table = BackfillTable(model, using)
    return table.count(table.db_id(after) if after is not None else None)


def _run_batch(
    table: BackfillTable, scanned: list[tuple[Any, Any, Any]], report: BackfillReport, *, dry_run: bool
) -> None:
    """Plan, lock, re-read and write one batch, then add it to `report`.

    The report changes only once the batch has committed, so an interrupted
    batch is counted by the run that redoes it.
    """
    plans = {row[0]: _plan_row(table, row[1], row[2]) for row in scanned}
    changed = [row for row in scanned if plans[row[0]].changed]
    if changed and not dry_run:
        stored = {row[0]: (row[1], row[2]) for row in changed}
        with transaction.atomic(using=table.alias):
            fresh = table.lock_and_read([row[0] for row in changed])
            for row_id in stored.keys() - {row[0] for row in fresh}:
                del plans[row_id]  # deleted since the scan: nothing to count
            writes = []
            for row_id, citations, inline_citations in fresh:
                if (citations, inline_citations) != stored[row_id]:
                    # Another writer committed since the scan: decide on what
                    # is stored now, never on what was scanned.
                    plans[row_id] = _plan_row(table, citations, inline_citations)
                if plans[row_id].changed:
                    writes.append((row_id, plans[row_id]))
            table.write(writes)
    report.rows_scanned += len(scanned)
    changed_rows, malformed_rows, typed = 0, 0, Counter[str]()
    for row_id, plan in plans.items():
        if plan.malformed is not None:
            report.malformed.append(MalformedRow(table.text_id(row_id), plan.malformed))
            malformed_rows += 1
            continue
        changed_rows += plan.changed
        for result in plan.lists:
            typed.update(result.typed)
            report.already_typed += result.already_typed
            report.left_untyped += result.left_untyped
    report.rows_changed += changed_rows
    report.typed.update(typed)
    if not dry_run:
        from telemetry import metrics  # with the first batch, not with this module (docs/metrics.md)

        metrics.backfill_batch(scanned=len(scanned), changed=changed_rows, malformed=malformed_rows, typed=typed)


def _plan_row(table: BackfillTable, citations: Any, inline_citations: Any) -> RowPlan:
    """Decode and backfill both columns of one row, or say why it is malformed."""
    results = []
    for name, raw in zip(JSON_FIELDS, (citations, inline_citations), strict=True):
        value = table.decode(name, raw)
        result = backfill_citation_list(value)
        if result is None:
            return RowPlan(malformed=f"{name} {_describe_malformed(value)}")
        results.append(result)
    return RowPlan(None, *results)


def _describe_malformed(value: Any) -> str:
    if value is NOT_JSON:
        return "is not JSON"
    if value is None:
        return "is null"
    if isinstance(value, list):
        return "holds a non-object"
    if isinstance(value, str):
        return "is a string (double-encoded JSON?)"
    return f"is {'an object' if isinstance(value, dict) else 'a ' + type(value).__name__}"
