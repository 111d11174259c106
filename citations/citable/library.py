"""The three library readers' output -> one block (docs/citable.md#library-documents).

Text: the document's `content`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

from citations.citable.blocks import SearchResult, is_http_url, nonblank_str
from citations.targets import CardDocumentTarget, CitationTarget, MortgageReferenceTarget, TaxReferenceTarget
from citations.urls import humanize_citation_url

__all__ = ["LIBRARY_SOURCE_PREFIXES", "LIBRARY_TOOLS", "library_blocks"]

LibraryTarget: TypeAlias = TaxReferenceTarget | CardDocumentTarget | MortgageReferenceTarget

LIBRARY_TOOLS: dict[str, tuple[str, type[LibraryTarget]]] = {
    "read_tax_authority": ("silvia://tax-authority/", TaxReferenceTarget),
    "read_credit_card_document": ("silvia://credit-card-corpus/", CardDocumentTarget),
    "read_mortgage_authority": ("silvia://mortgage-code/", MortgageReferenceTarget),
}
"""Library tool name -> (source prefix for `<path>`, target kind) (docs/citable.md#library-documents)."""

LIBRARY_SOURCE_PREFIXES: dict[str, type[LibraryTarget]] = {prefix: kind for prefix, kind in LIBRARY_TOOLS.values()}
"""Library source prefix -> target kind (the backfill reads sources back, docs/backfill.md)."""


def library_blocks(
    tool_name: str, tool_input: Mapping[str, object], output: Mapping[str, object]
) -> list[SearchResult]:
    """The block of one library read (docs/citable.md#library-documents).

    `tool_name` is a key of `LIBRARY_TOOLS`; `output` is `{"path", "content",
    "meta"}`. No block when `content` is blank or nothing names the document
    (no http(s) `meta.source_url` and no path). Never raises.
    """
    prefix, kind = LIBRARY_TOOLS[tool_name]
    content = nonblank_str(output.get("content"))
    if content is None:
        return []  # nothing to cite
    path = nonblank_str(output.get("path")) or nonblank_str(tool_input.get("path"))
    meta = output.get("meta")
    if not isinstance(meta, dict):
        meta = {}
    source_url = meta.get("source_url")
    if is_http_url(source_url):
        source = humanize_citation_url(source_url)
        target: CitationTarget = kind(source)
    elif path is not None:
        source = prefix + path
        target = kind(None)
    else:
        return []  # no URL and no path: nothing names the document
    file_name = path.rsplit("/", 1)[-1] if path is not None else ""
    title = nonblank_str(meta.get("title")) or file_name or path or source
    return [SearchResult(source, title, (content,), target)]
