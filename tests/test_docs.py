"""The README and docs/ stand alone: every relative link resolves, inside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to `-`."""
    anchors = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            text = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_links_stay_in_the_repository_and_resolve(page):
    text = page.read_text(encoding="utf-8")
    assert "../shared" not in text
    for target in LINK.findall(text):
        if target.startswith(("http://", "https://")):
            continue  # vendor references
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.is_relative_to(REPO), target
        assert resolved.exists(), f"{page.name}: {target}"
        if anchor:
            assert anchor in _anchors(resolved), f"{page.name}: {target}"


def test_docs_index_lists_every_page():
    index = (REPO / "docs" / "README.md").read_text(encoding="utf-8")
    for page in (REPO / "docs").glob("*.md"):
        if page.name != "README.md":
            assert f"]({page.name})" in index, page.name
