"""The library corpus: one executor behind the three reader tools (docs/citable.md).

`read_tax_authority`, `read_credit_card_document` and `read_mortgage_authority`
each read one file of their own folder under the corpus root (the
`CITATION_CORPUS_ROOT` setting), with its optional `<file>.meta.json` sidecar.
The output is what `citations.citable.to_citable_content` reads for these tools:
`{"path": str, "content": str, "meta": dict | None}`.

Pure Python file I/O: no Django import, the root is passed in. Which
tools read which folder is declared once, in `citations.citable.library.LIBRARIES`.
"""

from __future__ import annotations

import json
import posixpath
from pathlib import Path
from typing import Any, TypedDict

from citations.citable.library import LIBRARIES

#: Reader tool name -> its folder under the corpus root (docs/citable.md; declared in `citations.citable.library`).
CORPUS_FOLDERS: dict[str, str] = {library.tool: library.folder for library in LIBRARIES}

SIDECAR_SUFFIX = ".meta.json"


class CorpusDocument(TypedDict):
    """One read: the normalised relative path, the file's text, its sidecar object or None."""

    path: str
    content: str
    meta: dict[str, Any] | None


class CorpusPathError(ValueError):
    """A reader path that cannot be served; the message names the path and why.

    Raised for an empty, non-string, absolute or NUL-carrying path, one whose
    `..` leaves the folder, one that resolves (through a symlink) outside the
    folder, a directory, a missing file, and a file that is not UTF-8 text.
    `path` is the path as given.
    """

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"corpus path {path!r}: {reason}")
        self.path = path
        self.reason = reason


def _normalise(path: object) -> str:
    """Check a requested path lexically and return it relative, `/`-separated, without `.`/`..`."""
    if not isinstance(path, str):
        raise CorpusPathError(path, "expected a string")
    if not path:
        raise CorpusPathError(path, "is empty")
    if "\x00" in path:
        raise CorpusPathError(path, "contains a NUL byte")
    if path.startswith("/"):
        raise CorpusPathError(path, "is absolute; give a path relative to the corpus folder")
    normalised = posixpath.normpath(path)
    if normalised == ".." or normalised.startswith("../"):
        raise CorpusPathError(path, "leaves the corpus folder")
    if normalised.endswith(SIDECAR_SUFFIX):
        # A sidecar describes a document; it is not one to cite.
        raise CorpusPathError(path, f"is a {SIDECAR_SUFFIX} sidecar, not a document")
    return normalised


def _read_sidecar(document: Path, folder: Path) -> dict[str, Any] | None:
    """The sidecar's JSON object, or None.

    None when there is no sidecar, or it is not a regular file inside the
    folder, not UTF-8, not JSON, or JSON that is not an object: a broken
    sidecar only costs the document its URL and title, never the read.
    """
    sidecar = document.with_name(document.name + SIDECAR_SUFFIX)
    try:
        resolved = sidecar.resolve(strict=True)
        if not resolved.is_relative_to(folder) or not resolved.is_file():
            return None
        meta = json.loads(resolved.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def read_corpus_document(tool_name: str, path: str, *, root: Path) -> CorpusDocument:
    """Read `path` from the folder of reader `tool_name` under `root` (docs/citable.md).

    Returns `{"path": normalised relative path, "content": file text, "meta":
    sidecar object or None}`. `content` is the file's exact text (UTF-8, line
    endings kept). A `..` that stays inside the folder is allowed and
    normalised away; a symlink is followed only while its target stays inside
    the folder.

    Raises `ValueError` for a `tool_name` not in `CORPUS_FOLDERS`, and
    `CorpusPathError` (a `ValueError`) naming the path when it is empty,
    absolute, holds a NUL byte, leaves the folder (lexically or through a
    symlink), names a sidecar, is a directory, is missing, or is not UTF-8 text.
    """
    try:
        folder_name = CORPUS_FOLDERS[tool_name]
    except KeyError:
        raise ValueError(
            f"unknown corpus reader tool {tool_name!r}; expected one of {sorted(CORPUS_FOLDERS)}"
        ) from None
    relative = _normalise(path)
    folder = (Path(root) / folder_name).resolve()
    try:
        resolved = (folder / relative).resolve(strict=True)
    except FileNotFoundError:
        raise CorpusPathError(path, f"no such document in {folder_name}/") from None
    except (OSError, RuntimeError) as error:  # symlink loop, permission, name too long
        raise CorpusPathError(path, f"cannot be opened ({error.__class__.__name__})") from None
    if not resolved.is_relative_to(folder):
        raise CorpusPathError(path, f"resolves outside {folder_name}/")
    if resolved.is_dir():
        raise CorpusPathError(path, "is a directory, not a document")
    if not resolved.is_file():
        raise CorpusPathError(path, "is not a regular file")
    try:
        content = resolved.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise CorpusPathError(path, "is not UTF-8 text") from None
    except OSError as error:
        raise CorpusPathError(path, f"cannot be read ({error.strerror or error.__class__.__name__})") from None
    # The sidecar sits beside the name that was asked for, not beside a symlink's target.
    return {"path": relative, "content": content, "meta": _read_sidecar(folder / relative, folder)}
