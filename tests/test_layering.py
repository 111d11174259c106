"""The apps form one chain, each importing only the apps below it (issue 23): no arrow runs back up.

citations (the pure domain) < finance < chat < pages < silvia (settings, URLs) < devtools (development
only). Pure and fast: every module's imports are read with `ast` (lazy imports inside functions
included, and `import_module`/`import_string` of a constant); nothing is imported or run. Strict:
no known exception (the finance -> chat edge went with the tool protocol's move to citations.tools).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("citations", "finance", "chat", "pages", "silvia", "devtools")


def imported_modules(source: str, package: str) -> Iterator[tuple[str, int]]:
    """`(module, line)` for every import in `source`; `package` (dotted) resolves relative imports."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                yield ".".join([*base, *([node.module] if node.module else [])]), node.lineno
            else:
                yield node.module or "", node.lineno
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) in ("import_module", "import_string")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value, node.lineno


def upward_imports(root: Path, layers: tuple[str, ...]) -> list[str]:
    """`"file:line: module"` for every import of an app above the importing one."""
    found = []
    for floor, app in enumerate(layers):
        for path in sorted((root / app).rglob("*.py")):
            relative = path.relative_to(root)
            package = ".".join(relative.with_suffix("").parts[:-1])
            for module, line in imported_modules(path.read_text(encoding="utf-8"), package):
                top = module.split(".")[0]
                if top in layers and layers.index(top) > floor:
                    found.append(f"{relative.as_posix()}:{line}: {module}")
    return found


def test_no_app_imports_a_higher_one():
    assert upward_imports(ROOT, LAYERS) == [], "imports that run back up " + " < ".join(LAYERS)


def test_every_app_is_placed():
    apps = {path.parent.name for path in ROOT.glob("*/apps.py")} | {"citations", "silvia"}
    assert apps == set(LAYERS)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from high.models import X\n", ["low/mod.py:1: high.models"]),
        ("import high\n", ["low/mod.py:1: high"]),
        ("def f():\n    from high import admin\n", ["low/mod.py:2: high"]),
        ("import_module('high.x')\n", ["low/mod.py:1: high.x"]),
        ("from . import sibling\nfrom .sub import x\n", []),
        ("from base import targets\nimport low.other\n", []),
    ],
    ids=["from", "import", "lazy", "import_module", "relative", "down and sideways"],
)
def test_the_scan_sees_every_kind_of_import(tmp_path, source, expected):
    for app in ("base", "low", "high"):
        (tmp_path / app).mkdir()
    (tmp_path / "low" / "mod.py").write_text(source)
    assert upward_imports(tmp_path, ("base", "low", "high")) == expected
