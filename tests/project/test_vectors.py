"""The test vectors themselves: well-formed, and the shared cases folded in as an extra check."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests import cases
from tests.ast_support import docstring_ids

VECTOR_FILES = sorted(path.name for path in cases.VECTORS_DIR.glob("*.json"))


def test_every_rule_has_its_vectors():
    assert VECTOR_FILES == [
        "account_ids.json",
        "backfill.json",
        "bad_turns.json",
        "checkpoints.json",
        "citable.json",
        "humanize_urls.json",
        "parse_target.json",
        "registry.json",
        "support.json",
        "support_figures.json",
        "support_turns.json",
        "turns.json",
    ]


@pytest.mark.parametrize("name", VECTOR_FILES)
def test_vector_file_has_an_about_and_cases_with_unique_whys(name):
    data = json.loads((cases.VECTORS_DIR / name).read_text(encoding="utf-8"))
    assert isinstance(data["about"], str) and data["about"]
    whys = [case["why"] for case in data["cases"]]
    assert whys and len(whys) == len(set(whys))


def test_shared_cases_run_only_when_they_add_something(tmp_path, monkeypatch):
    vectors = cases.load_cases("backfill.json", shared=False)
    same = {**vectors[0], "why": "worded differently"}
    citation = {"source": "silvia://analysis", "title": None}
    new = {"why": "a new case", "citation": citation, "expect": {"kind": "analysis"}}
    (tmp_path / "backfill.json").write_text(json.dumps({"about": "x", "cases": [same, new]}))
    monkeypatch.setattr(cases, "SHARED_CASES_DIR", tmp_path)

    loaded = cases.load_cases("backfill")

    assert loaded == [*vectors, {**new, "why": "shared: a new case"}]
    assert cases.load_cases("backfill", shared=False) == vectors


def _code_strings(path: Path) -> list[str]:
    """The string constants of a module, docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = docstring_ids(tree)
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_only_tests_cases_reads_the_workspace_cases_folder():
    # A clone has no `../shared`: a test that read it directly would skip or
    # fail there. The vectors (`load_cases`) are the way in. (This module
    # spells the folder's name to look for it, so it is left out.)
    tests_dir = Path(cases.__file__).parent
    readers = sorted(
        path.relative_to(tests_dir).as_posix()
        for path in tests_dir.rglob("*.py")
        if path != Path(__file__).resolve()
        and any(text == "shared" or "shared/" in text for text in _code_strings(path))
    )
    assert readers == ["cases.py"]
