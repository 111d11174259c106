"""Sources that change (SPEC 15, docs/support.md#sources-that-change): do the library documents stored citations
cite still hold the text their support's digest was taken of?

`check_citation_sources` reads `ai_chat_logs` in primary-key batches, keeps the inline citations of a library
document by its corpus path (`tax_reference`, `card_document`, `mortgage_reference` targets whose source is
`silvia://tax-authority/<path>`, `silvia://credit-card-corpus/<path>` or `silvia://mortgage-code/<path>`) that
carry a digest, reads each document once through the readers a live turn uses (`tools.library`) and the same
citable rule (`citations.citable.to_citable_content`), and compares digests (`citations.support.source_digest`).
It writes nothing. `manage.py check_citation_sources` is its command.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q, QuerySet

from chat.citation_queries import HasCitationState
from chat.models import ChatLog
from citations.citable import LIBRARIES, to_citable_content
from citations.summary import classify_citation
from citations.support import read_support, source_digest
from citations.tools import ToolError
from tools.library import library_readers

__all__ = [
    "CHANGED",
    "DEFAULT_BATCH_SIZE",
    "GONE",
    "SourceCheckReport",
    "SourceFinding",
    "check_citation_sources",
    "rows_to_check",
]

DEFAULT_BATCH_SIZE = 1000
CHANGED = "changed"
GONE = "gone"


@dataclass(frozen=True, slots=True)
class SourceFinding:
    """A citation whose document no longer has its digest (`changed`) or cannot be read any more (`gone`).

    `log_id` and `index` (0-based, in `inline_citations`) name the citation; `reason` says why a `gone`
    document cannot be read.
    """

    outcome: str
    log_id: uuid.UUID
    index: int
    source: str
    reason: str = ""


@dataclass
class SourceCheckReport:
    """What a run found: rows scanned, citations checked (a library document by path, with a digest),
    `unchanged`, the findings (`changed`, `gone`), citations of such documents without a digest (saved before
    support, or unchecked), and the documents read."""

    rows_scanned: int = 0
    checked: int = 0
    unchanged: int = 0
    without_digest: int = 0
    documents: int = 0
    findings: list[SourceFinding] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(1 for finding in self.findings if finding.outcome == outcome)


def rows_to_check() -> QuerySet[ChatLog]:
    """The logs that may cite a library document: a citation with a library target in either column (asked of
    the JSON by the database, through the kind filter's GIN index on PostgreSQL), in primary-key order."""
    libraries = Q()
    for library in LIBRARIES:
        libraries |= Q(HasCitationState(library.kind.kind))
    return ChatLog.objects.filter(libraries).order_by("pk")


def _batches(rows: QuerySet[ChatLog], batch_size: int) -> Iterator[list[tuple[uuid.UUID, Any]]]:
    """`(pk, inline_citations)` of `rows`, `batch_size` at a time, by primary key (no OFFSET, no long cursor)."""
    after: uuid.UUID | None = None
    while True:
        page = rows if after is None else rows.filter(pk__gt=after)
        batch = list(page.values_list("pk", "inline_citations")[:batch_size])
        if not batch:
            return
        yield batch
        after = batch[-1][0]


def _document(entry: Any) -> tuple[str, str] | None:
    """`(reader tool, corpus path)` of a citation of a library document by path: its source is the library's
    `silvia://<folder>/<path>` and its target that library's kind with `url: null`
    (docs/citable.md#library-documents); else None."""
    source = entry.get("source") if isinstance(entry, dict) else None
    if not isinstance(source, str):
        return None
    _, target = classify_citation(entry)
    for library in LIBRARIES:
        path = source.removeprefix(library.source_prefix)
        if path and path != source and isinstance(target, library.kind) and target.url is None:
            return library.tool, path
    return None


class _Documents:
    """Each document read once: its digest as a turn would take it, or why it cannot be read."""

    def __init__(self) -> None:
        self.readers = {reader.name: reader for reader in library_readers()}
        self.read: dict[tuple[str, str], tuple[str | None, str]] = {}

    def digest(self, tool: str, path: str) -> tuple[str | None, str]:
        key = (tool, path)
        if key not in self.read:
            self.read[key] = self._digest(tool, path)
        return self.read[key]

    def _digest(self, tool: str, path: str) -> tuple[str | None, str]:
        tool_input = {"path": path}
        try:
            output = self.readers[tool].run(tool_input, user=None)
        except ToolError as error:
            return None, error.reason
        blocks = to_citable_content(tool, tool_input, output)
        if not blocks:
            return None, "the document is blank"
        return source_digest(blocks[0].texts), ""


def check_citation_sources(
    *, batch_size: int = DEFAULT_BATCH_SIZE, on_batch: Callable[[int], None] | None = None
) -> SourceCheckReport:
    """Check every stored citation of a library document by path against the document as it reads now.

    `on_batch(rows)` is called after each batch with the rows it held. Writes nothing. Raises `ValueError` for
    a `batch_size` below 1.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, not {batch_size}")
    report, documents = SourceCheckReport(), _Documents()
    for batch in _batches(rows_to_check(), batch_size):
        for log_id, inline in batch:
            for index, entry in enumerate(inline if isinstance(inline, list) else []):
                _check(report, documents, log_id, index, entry)
        report.rows_scanned += len(batch)
        if on_batch is not None:
            on_batch(len(batch))
    report.documents = len(documents.read)
    return report


def _check(report: SourceCheckReport, documents: _Documents, log_id: uuid.UUID, index: int, entry: Any) -> None:
    document = _document(entry)
    if document is None:
        return
    support = read_support(entry.get("support"))
    if support is None or support.digest is None:
        report.without_digest += 1
        return
    report.checked += 1
    digest, reason = documents.digest(*document)
    if digest is None:
        report.findings.append(SourceFinding(GONE, log_id, index, entry["source"], reason))
    elif digest != support.digest:
        report.findings.append(SourceFinding(CHANGED, log_id, index, entry["source"]))
    else:
        report.unchanged += 1
