"""The apps import one way (docs/layout.md#apps-import-downwards): each imports only the apps below it.

Modules are cut by what they are for, not by a line count (issue 37): no size is checked here.

Pure and fast: every module's imports are read with `ast` (at any depth,
lazy imports inside functions included, and `import_module`/`import_string`
of a constant name), and line counts are read from the files; nothing is
imported or run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ast_support import APPS

REPO = Path(__file__).resolve().parents[2]

#: The apps, lowest first (tests/ast_support.py; docs/deploying.md#what-a-production-install-leaves-out).
LAYERS = APPS
#: Folders of Python that are not apps and may import any of them: the
#: tests, the benchmarks, and the dependency lock script.
NOT_APPS = frozenset({"tests", "bench", "requirements"})

#: Known imports that run back up, as (importing app, imported module). Each
#: names the work that removes it; the test fails when an entry is no longer
#: needed, so it is deleted with the edge. None today: the last one,
#: finance -> tools.base, went when the tool protocol moved to
#: citations.tools (issue 23 item 1).
KNOWN_UPWARD: frozenset[tuple[str, str]] = frozenset()

#: Folders of the checkout that hold Python which is not ours: the virtualenv, runtime files, npm's.
NOT_OURS = frozenset({".venv", "var", "node_modules"})


def imported_modules(path: Path, package: str) -> Iterator[tuple[str, int]]:
    """`(module, line)` for every module `path` imports; `package` resolves relative imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: inside `package`, so inside the same app
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                yield ".".join([*base, *([node.module] if node.module else [])]), node.lineno
            else:
                assert node.module is not None
                yield node.module, node.lineno
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) in ("import_module", "import_string")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value, node.lineno


def upward_imports(root: Path, layers: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """Every import of an app above the importing one: `(importing app, module, "file:line")`."""
    found = []
    for low, app in enumerate(layers):
        for path in sorted((root / app).rglob("*.py")):
            relative = path.relative_to(root)
            package = ".".join(relative.with_suffix("").parts[:-1])
            for module, line in imported_modules(path, package):
                top = module.split(".")[0]
                if top in layers and layers.index(top) > low:
                    found.append((app, module, f"{relative}:{line}"))
    return found


def _allowed(app: str, module: str) -> bool:
    return any(app == known_app and (module + ".").startswith(known + ".") for known_app, known in KNOWN_UPWARD)


def test_no_app_imports_a_higher_one():
    upward = upward_imports(REPO, LAYERS)
    unexpected = [edge for edge in upward if not _allowed(edge[0], edge[1])]
    assert unexpected == [], "imports that run back up the app order " + " < ".join(LAYERS)
    # Each allow-list entry is still needed; a stale one must go.
    for known_app, known in sorted(KNOWN_UPWARD):
        assert any(app == known_app and _allowed(app, module) for app, module, _ in upward), (
            f"{known_app} no longer imports {known}: delete its KNOWN_UPWARD entry"
        )


def test_every_python_folder_is_placed():
    folders = {path.parent.relative_to(REPO).parts[0] for path in REPO.glob("*/**/*.py")}
    folders -= {".venv", "var"}
    assert folders - NOT_APPS == set(LAYERS), "place a new folder in LAYERS (or NOT_APPS)"


def test_citations_imports_nothing_of_ours():
    ours = {*LAYERS, *NOT_APPS}
    for path in sorted((REPO / "citations").rglob("*.py")):
        package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
        for module, line in imported_modules(path, package):
            assert module.split(".")[0] not in ours - {"citations"}, f"{path.relative_to(REPO)}:{line}: {module}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from chat.models import ChatLog\n", [("low", "chat.models")]),
        ("import chat\n", [("low", "chat")]),
        ("def f():\n    from chat import admin\n", [("low", "chat")]),
        ("from importlib import import_module\nimport_module('chat.x')\n", [("low", "chat.x")]),
        ("from . import sibling\nfrom .sub import x\n", []),
        ("from citations import targets\nimport low.other\n", []),
    ],
    ids=["from", "import", "lazy", "import_module", "relative", "sideways and down"],
)
def test_the_scan_sees_every_kind_of_import(tmp_path, source, expected):
    (tmp_path / "low").mkdir()
    (tmp_path / "chat").mkdir()
    (tmp_path / "low" / "mod.py").write_text(source)
    found = upward_imports(tmp_path, ("citations", "low", "chat"))
    assert [(app, module) for app, module, _ in found] == expected
