"""The three library readers: declared once, and their output -> one block (docs/citable.md#library-documents).

`LIBRARIES` names each reader tool with its folder under the corpus root,
the target kind it cites, what the model is told it reads and what the v5
prompt calls a document's page; the readers' specs (`LIBRARY_SPECS`), the
corpus folders (`citations.corpus.CORPUS_FOLDERS`), the source prefixes and
the executors' descriptions (`tools.library`) are all derived from it.

Text: the document's `content`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from citations.citable.blocks import SearchResult, is_http_url, nonblank_str
from citations.citable.spec import ToolSpec
from citations.json_checks import expect
from citations.targets import CardDocumentTarget, CitationTarget, MortgageReferenceTarget, TaxReferenceTarget
from citations.urls import humanize_citation_url

__all__ = [
    "LIBRARIES",
    "LIBRARY_SOURCE_PREFIXES",
    "LIBRARY_SPECS",
    "LIBRARY_TOOLS",
    "Library",
    "check_library_output",
]

LibraryTarget: TypeAlias = TaxReferenceTarget | CardDocumentTarget | MortgageReferenceTarget


@dataclass(frozen=True, slots=True)
class Library:
    """One library and the reader tool that reads it (docs/citable.md#library-documents).

    `tool`: the reader's tool name. `folder`: its folder under the corpus
    root, which also makes its sources without a URL,
    `silvia://<folder>/<path>`. `kind`: the target kind it cites.
    `description`: what the model is told the tool reads. `page`: what the
    v5 prompt's citation table calls a document's page (its source when the
    sidecar gives a URL).
    """

    tool: str
    folder: str
    kind: type[LibraryTarget]
    description: str
    page: str

    @property
    def source_prefix(self) -> str:
        """`silvia://<folder>/`: the source of a document without a URL is this and its path."""
        return f"silvia://{self.folder}/"

    def blocks(self, tool_input: Mapping[str, object], output: Mapping[str, object]) -> list[SearchResult]:
        """The block of one read of this library (docs/citable.md#library-documents).

        `output` is `{"path", "content", "meta"}`. No block when `content` is
        blank or nothing names the document (no http(s) `meta.source_url` and
        no path). Never raises.
        """
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
            target: CitationTarget = self.kind(source)
        elif path is not None:
            source = self.source_prefix + path
            target = self.kind(None)
        else:
            return []  # no URL and no path: nothing names the document
        file_name = path.rsplit("/", 1)[-1] if path is not None else ""
        title = nonblank_str(meta.get("title")) or file_name or path or source
        return [SearchResult(source, title, (content,), target)]


LIBRARIES: tuple[Library, ...] = (
    Library(
        tool="read_tax_authority",
        folder="tax-authority",
        kind=TaxReferenceTarget,
        description="Read one document of the tax library (IRS publications, US Code, eCFR) by its path.",
        page="the publication's page (irs.gov, ecfr.gov, uscode.house.gov)",
    ),
    Library(
        tool="read_credit_card_document",
        folder="credit-card-corpus",
        kind=CardDocumentTarget,
        description="Read one credit card's terms document by its path (issuer/card/file).",
        page="the issuer's terms page",
    ),
    Library(
        tool="read_mortgage_authority",
        folder="mortgage-code",
        kind=MortgageReferenceTarget,
        description="Read one mortgage regulation or note (Regulation Z, US Code) by its path.",
        page="the regulation's page",
    ),
)
"""The libraries, in the order the prompt and docs list them."""

LIBRARY_TOOLS: dict[str, tuple[str, type[LibraryTarget]]] = {
    library.tool: (library.source_prefix, library.kind) for library in LIBRARIES
}
"""Library tool name -> (source prefix for `<path>`, target kind) (docs/citable.md#library-documents)."""

LIBRARY_SOURCE_PREFIXES: dict[str, type[LibraryTarget]] = {prefix: kind for prefix, kind in LIBRARY_TOOLS.values()}
"""Library source prefix -> target kind (the backfill reads sources back, docs/backfill.md)."""


def check_library_output(tool_input: Mapping[str, Any], output: Mapping[str, Any], path: str) -> None:
    """A record's check of what `Library.blocks` reads: `content` a string; `path` a string, or
    absent and the input's `path` a string; `meta` an object or null.

    Raises `TurnRecordError` at `path.content`, `path.path`, `path.meta` or the event's `input.path`.
    """
    if output.get("path") is None:
        # <path> falls back to the input's (docs/citable.md).
        expect(tool_input.get("path"), str, f"{path.removesuffix('.output')}.input.path", "a string (no output.path)")
    else:
        expect(output["path"], str, f"{path}.path", "a string")
    expect(output.get("content"), str, f"{path}.content", "a string")
    meta = output.get("meta")
    if meta is not None:
        # The sidecar's fields are not checked: the reader passes them
        # through, and a `source_url` or `title` that is not a string is
        # read as absent (docs/citable.md).
        expect(meta, dict, f"{path}.meta", "an object or null")


_PATH_INPUT = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "path of the document, e.g. irs/p590a.md"}},
    "required": ["path"],
}

LIBRARY_SPECS: tuple[ToolSpec, ...] = tuple(
    ToolSpec(
        name=library.tool,
        input_schema=_PATH_INPUT,
        check_output=check_library_output,
        citable=library.blocks,
        prompt_sources=f"{library.page}, else {library.source_prefix}<path>",
    )
    for library in LIBRARIES
)
"""The three readers (docs/citable.md#library-documents; their executor: `tools.library.LibraryReader`)."""
