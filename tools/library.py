"""The three library readers as tool executors (docs/citable.md and docs/citable.md#the-library-corpus).

One class, one instance per library of `citations.citable.LIBRARIES`
(`read_tax_authority`, `read_credit_card_document`,
`read_mortgage_authority`), over `citations.corpus.read_corpus_document` and
the `CITATION_CORPUS_ROOT` setting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from citations.citable import LIBRARIES, TOOL_SPECS, Library, ToolSpec
from citations.corpus import CorpusPathError, read_corpus_document
from citations.tools import ToolError

__all__ = ["LibraryReader", "library_readers"]


class LibraryReader:
    """A reader tool: input `{"path": str}`, output `{"path", "content", "meta"}` (docs/citable.md)."""

    def __init__(self, library: Library, root: Path) -> None:
        self.library = library
        self.name = library.tool
        self.root = root
        self.spec: ToolSpec = TOOL_SPECS[library.tool]

    def definition(self) -> dict[str, Any]:
        """The Messages API tool definition."""
        return self.spec.definition(
            f"{self.library.description} Paths are relative to the {self.library.folder}/ library."
        )

    def run(self, tool_input: dict[str, Any], *, user: Any) -> dict[str, Any]:
        """Read the document; raises `ToolError` naming the path for a refused or missing one."""
        try:
            # A missing or non-string path is the model's mistake: the reader
            # refuses it with CorpusPathError, as it does an empty one.
            return dict(read_corpus_document(self.name, tool_input.get("path"), root=self.root))  # type: ignore[arg-type]
        except CorpusPathError as error:
            raise ToolError(str(error)) from None


def library_readers() -> list[LibraryReader]:
    """The three readers over the configured corpus root."""
    return [LibraryReader(library, Path(settings.CITATION_CORPUS_ROOT)) for library in LIBRARIES]
