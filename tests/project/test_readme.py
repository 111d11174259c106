"""The README stays one a newcomer finishes (issue 21): short, the commands first, only real make targets.

Pure: no database. Its links and anchors, and those of docs/, are checked by tests/project/test_docs.py.
"""

from __future__ import annotations

import re

from tests.project.test_docs import DOCS, REPO, prose_lines

README = REPO / "README.md"
MAX_LINES = 260


def makefile_targets() -> set[str]:
    """The Makefile's targets: `name:` rules (target-specific variables included) and `.PHONY`."""
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, flags=re.MULTILINE))
    for phony in re.findall(r"^\.PHONY:(.*)$", text, flags=re.MULTILINE):
        targets.update(phony.split())
    return targets


def make_commands(text: str) -> list[str]:
    """The targets of every `make <target>` in code: fenced blocks and `inline` spans, not prose."""
    code, in_fence = [], False
    for line in text.splitlines():
        if re.match(r"\s*(```|~~~)", line):
            in_fence = not in_fence
        elif in_fence:
            code.append(line)
    code += re.findall(r"`([^`\n]+)`", "\n".join(prose_lines(text)))
    command = re.compile(r"(?<![\w./-])make[ \t]+(?:[A-Z_]+=\S+[ \t]+)*([a-z][\w-]*)")
    return [target for piece in code for target in command.findall(piece)]


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_the_readme_opens_with_the_two_commands():
    head = README.read_text(encoding="utf-8").splitlines()[:8]
    commands = [line.split()[:2] for line in head if line.startswith("make ")]
    assert ["make", "run"] in commands, head
    assert ["make", "test"] in commands, head
    assert ["make", "run-recorded"] in commands, head


def test_every_make_command_in_the_readme_and_docs_is_a_real_target():
    targets = makefile_targets()
    assert {"install", "run", "run-recorded", "test", "bench", "check"} <= targets
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        for target in make_commands(page.read_text(encoding="utf-8")):
            assert target in targets, f"{page.name}: make {target}"
    assert set(make_commands(README.read_text(encoding="utf-8"))) >= {"run", "run-recorded", "test"}


def test_make_commands_are_found_in_code_only():
    text = (
        "To make sure:\n\n```sh\nmake run HOST=127.0.0.1:8001\nX=1 make test\n```\n\n"
        "`make`, then `make PYTHON=python3.12 bench`."
    )
    assert make_commands(text) == ["run", "test", "bench"]
