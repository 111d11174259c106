"""What the tests of `backfill_citation_targets` on real rows share (docs/backfill.md): row ids in a known
order, a column as the database holds it, the admin's counts of a row, a run, and a row saved before targets
existed."""

from __future__ import annotations

import uuid

from django.db import connection

from chat.backfill import BackfillReport, backfill_citation_targets
from chat.models import ChatLog
from chat.selectors import chat_logs_with_citation_counts
from tests.factories import ChatLogFactory


def _id(n: int) -> uuid.UUID:
    """Row ids in a known primary-key order."""
    return uuid.UUID(f"00000000-0000-4000-8000-{n:012d}")


def _stored_text(log_id, column: str = "citations") -> str:
    """The column exactly as the database holds it (jsonb's text form on PostgreSQL)."""
    cast = "::text" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {connection.ops.quote_name(column)}{cast} FROM ai_chat_logs WHERE id = %s",
            [ChatLog._meta.pk.get_db_prep_value(log_id, connection)],
        )
        return cursor.fetchone()[0]


def _counts(log_id) -> tuple[int, int, int, int]:
    """(citations, typed, untyped, malformed) as the admin computes them from the stored JSON."""
    row = chat_logs_with_citation_counts().get(pk=log_id)
    return (row.citation_total, row.typed_total, row.untyped_total, row.malformed_total)


def _typed(log_id) -> int:
    return _counts(log_id)[1]


def _run(**kwargs) -> BackfillReport:
    return backfill_citation_targets(model=ChatLog, **kwargs)


def _old(n: int, *sources: str, **extra) -> ChatLog:
    """A row saved before targets existed: one untyped citation per source."""
    citations = [{"source": s, "title": f"t{i}", "cited_text": f"c{i}"} for i, s in enumerate(sources)]
    inline = [{**c, "start": 2 * i, "end": 2 * i + 1} for i, c in enumerate(citations)]
    return ChatLogFactory.create(id=_id(n), citations=citations, inline_citations=inline, **extra)
