"""The README and docs/ stand alone: every relative link and anchor resolves, inside the repository.

Pure: no database. The README's own promises (short, the commands first) are in tests/project/test_readme.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
#: Every Markdown page a reader is sent to: the README, docs/, and the benchmarks' README that docs/ links into.
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md")), REPO / "bench" / "README.md"]
#: `[text](target)`, `<img src="target">`, `<a href="target">`.
LINK = re.compile(r"\]\(([^)\s]+)\)|<(?:img|a)\s[^>]*?(?:src|href)=\"([^\"]+)\"")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(text: str) -> list[str]:
    """The page's lines outside fenced code blocks (a `# comment` in a shell block is not a heading)."""
    lines, in_fence = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's heading anchor: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings; a repeated heading gets `-1`, `-2`, ..."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose_lines(page.read_text(encoding="utf-8")):
        if match := re.match(r"#{1,6}\s+(.*)", line):
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    return [a or b for a, b in LINK.findall("\n".join(prose_lines(page.read_text(encoding="utf-8"))))]


def test_slugs_follow_githubs_rule():
    assert (
        slug("How a turn runs: the event log, checkpoints, resume")
        == "how-a-turn-runs-the-event-log-checkpoints-resume"
    )
    assert (
        slug("sql_tool: the `execute_sql` tool's isolated execution")
        == "sql_tool-the-execute_sql-tools-isolated-execution"
    )
    assert slug("The data migration or the command?") == "the-data-migration-or-the-command"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_links_stay_in_the_repository_and_resolve(page):
    text = page.read_text(encoding="utf-8")
    assert "../shared" not in text
    for target in links(page):
        if target.startswith(("http://", "https://", "mailto:")):
            continue  # vendor references
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.is_relative_to(REPO), target
        assert resolved.exists(), f"{page.name}: {target}"
        if anchor:
            assert anchor in anchors(resolved), f"{page.name}: {target}"


def test_docs_index_lists_every_page():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    for page in DOCS.glob("*.md"):
        if page.name != "README.md":
            assert f"]({page.name})" in index, page.name


def test_every_screenshot_is_shown_somewhere():
    shown = {(page.parent / target).resolve() for page in PAGES for target in links(page)}
    for image in (DOCS / "img").iterdir():
        assert image.resolve() in shown, image.name


def test_every_setting_read_from_the_environment_is_documented():
    """docs/configuration.md has a row for every variable silvia/settings.py reads."""
    settings = (REPO / "silvia" / "settings.py").read_text(encoding="utf-8")
    variables = set(re.findall(r"\benv(?:\.\w+)?\(\s*\"([A-Z][A-Z0-9_]*)\"", settings))
    assert len(variables) > 40, variables  # the pattern still finds them
    rows = "\n".join(
        line for line in (DOCS / "configuration.md").read_text(encoding="utf-8").splitlines() if line.startswith("|")
    )
    assert sorted(v for v in variables if f"`{v}`" not in rows) == []
