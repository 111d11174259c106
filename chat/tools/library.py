"""The three library readers as tool executors (docs/citable.md and docs/citable.md#the-library-corpus).

One class, three instances (`read_tax_authority`, `read_credit_card_document`,
`read_mortgage_authority`), over `citations.corpus.read_corpus_document` and
the `CITATION_CORPUS_ROOT` setting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from chat.tools.base import ToolError
from citations.corpus import CORPUS_FOLDERS, CorpusPathError, read_corpus_document

__all__ = ["LibraryReader", "library_readers"]

_DESCRIPTIONS = {
    "read_tax_authority": "Read one document of the tax library (IRS publications, US Code, eCFR) by its path.",
    "read_credit_card_document": "Read one credit card's terms document by its path (issuer/card/file).",
    "read_mortgage_authority": "Read one mortgage regulation or note (Regulation Z, US Code) by its path.",
}


class LibraryReader:
    """A reader tool: input `{"path": str}`, output `{"path", "content", "meta"}` (docs/citable.md)."""

    def __init__(self, name: str, root: Path) -> None:
        self.name = name
        self.root = root

    def definition(self) -> dict[str, Any]:
        """The Messages API tool definition."""
        folder = CORPUS_FOLDERS[self.name]
        return {
            "name": self.name,
            "description": f"{_DESCRIPTIONS[self.name]} Paths are relative to the {folder}/ library.",
            "input_schema": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "path of the document, e.g. irs/p590a.md"}},
                "required": ["path"],
            },
        }

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
    return [LibraryReader(name, Path(settings.CITATION_CORPUS_ROOT)) for name in CORPUS_FOLDERS]
