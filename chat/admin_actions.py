"""Writes that the chat admin can trigger: the source-only backfill on chosen rows (SPEC section 12).

`chat.backfill.backfill_citation_targets` walks the whole table in
primary-key batches (migration, management command); staff pick rows in the
changelist, so this runs the same per-row rule on just those ids:
`citations.backfill.backfill_citation_list` on both JSON columns, a row
whose column is not a list of objects skipped whole (as the command does),
and the summary columns (`chat.services.citation_summary_fields`) written
with the JSON, as every writer of those columns must.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from chat.models import ChatLog
from chat.services import citation_summary_fields
from citations.backfill import backfill_citation_list

__all__ = ["RecomputeResult", "logs_recompute_targets"]

#: Rows locked and rewritten per transaction.
BATCH_SIZE = 200


@dataclass(frozen=True, slots=True)
class RecomputeResult:
    """What a recompute did: rows rewritten, entries typed in each column, and
    rows skipped because a JSON column is not a list of objects."""

    logs: int = 0
    citations: int = 0
    inline_citations: int = 0
    malformed_logs: int = 0


def logs_recompute_targets(*, log_ids: Iterable[Any]) -> RecomputeResult:
    """Type the untyped citations of these `ai_chat_logs` rows from their sources.

    Entries that already have a `target` key (even a malformed one) are never
    touched; idempotent, so a second run types nothing. Rows are re-read
    under `SELECT ... FOR UPDATE` (a no-op on SQLite) in batches of
    `BATCH_SIZE`, each batch one transaction; only rows that gain a target
    are written. Ids that match no row are ignored.
    """
    ids = sorted(set(log_ids), key=str)
    logs = citations = inline = malformed = 0
    for offset in range(0, len(ids), BATCH_SIZE):
        with transaction.atomic():
            rows = (
                ChatLog.objects.select_for_update()
                .filter(pk__in=ids[offset : offset + BATCH_SIZE])
                .only("id", "citations", "inline_citations")
                .order_by("pk")
            )
            for log in rows:
                summary_list = backfill_citation_list(log.citations)
                inline_list = backfill_citation_list(log.inline_citations)
                if summary_list is None or inline_list is None:
                    malformed += 1
                    continue
                if not summary_list.changed and not inline_list.changed:
                    continue
                ChatLog.objects.filter(pk=log.pk).update(
                    citations=summary_list.value,
                    inline_citations=inline_list.value,
                    **citation_summary_fields(summary_list.value, inline_list.value),
                )
                logs += 1
                citations += len(summary_list.typed)
                inline += len(inline_list.typed)
    return RecomputeResult(logs=logs, citations=citations, inline_citations=inline, malformed_logs=malformed)
