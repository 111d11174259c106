"""The dependency groups (issue 21, item 1; docs/deploying.md#installing).

`requirements/runtime.txt` is what a server installs, `requirements/dev.txt`
adds tests, benchmarks and static checks; each has its constraint file
pinning every package, direct and transitive.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
from pathlib import Path

import pytest

from tests.ast_support import APPS

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "requirements"

# Tests, browsers, linters and type checkers: never on a server.
DEV_ONLY = {
    "playwright",
    "pytest",
    "pytest-django",
    "hypothesis",
    "factory-boy",
    "faker",
    "ruff",
    "mypy",
    "django-stubs",
    "djangorestframework-stubs",
    "types-pyyaml",
}
# The service's code: what runs on a server (tests/ and bench/ are the dev group's).
SERVICE_CODE = (*(app for app in APPS if app != "devtools"), "manage.py")


def _name(requirement: str) -> str:
    return re.split(r"[=<>!~\[; ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def _pins(path: Path) -> dict[str, str]:
    """`{normalised name: version}` of the `name==version` lines of a requirements or constraints file."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        assert "==" in line, f"{path.name}: {line!r} is not pinned with =="
        pins[_name(line)] = line.rsplit("==", 1)[1].strip()
    return pins


RUNTIME = _pins(REQUIREMENTS / "runtime.txt")
DEV = _pins(REQUIREMENTS / "dev.txt")
RUNTIME_LOCK = _pins(REQUIREMENTS / "runtime-constraints.txt")
DEV_LOCK = _pins(REQUIREMENTS / "dev-constraints.txt")


def test_the_runtime_group_holds_no_dev_package():
    assert sorted(DEV_ONLY & (RUNTIME.keys() | RUNTIME_LOCK.keys())) == []
    assert {"django", "uvicorn", "anthropic", "psycopg", "prometheus-client"} <= RUNTIME.keys()
    assert {"playwright", "pytest", "hypothesis", "factory-boy", "ruff", "mypy", "django-stubs"} <= DEV.keys()


def test_each_direct_pin_is_its_groups_lock():
    assert {name: RUNTIME_LOCK.get(name) for name in RUNTIME} == RUNTIME
    assert {name: DEV_LOCK.get(name) for name in DEV} == DEV
    # A package both groups need is pinned once, at the version production runs.
    assert sorted(RUNTIME_LOCK.keys() & DEV_LOCK.keys()) == []


def test_the_files_chain_to_their_constraints():
    assert "-c runtime-constraints.txt" in (REQUIREMENTS / "runtime.txt").read_text().splitlines()
    dev_lines = (REQUIREMENTS / "dev.txt").read_text().splitlines()
    assert "-r runtime.txt" in dev_lines and "-c dev-constraints.txt" in dev_lines
    assert "-r requirements/runtime.txt" in (ROOT / "requirements.txt").read_text().splitlines()


FILES = ["requirements.txt", *(f"requirements/{path.name}" for path in sorted(REQUIREMENTS.glob("*.txt")))]


@pytest.mark.parametrize("path", FILES)
def test_every_file_says_where_a_new_dependency_goes(path):
    text = (ROOT / path).read_text()
    assert "needed only by tests, benchmarks or static checks -> requirements/dev.txt" in text


def test_every_installed_package_is_pinned_at_its_version():
    # `make install` installs the dev group with both constraint files: a package
    # added without its pins (or its new transitive dependencies') fails here.
    pinned = {**RUNTIME_LOCK, **DEV_LOCK}
    installed = {
        _name(dist.metadata["Name"]): dist.version
        for dist in importlib.metadata.distributions()
        if _name(dist.metadata["Name"]) not in ("pip", "setuptools", "wheel")
    }
    unpinned = {name: (version, pinned.get(name)) for name, version in installed.items() if pinned.get(name) != version}
    assert unpinned == {}


def _top_level_imports(path: Path) -> set[str]:
    """Top-level names the module imports when it runs (not under `if TYPE_CHECKING:`)."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for statement in node.orelse:
                visit(statement)
            return
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    return names


def test_the_service_imports_only_runtime_packages():
    distributions = importlib.metadata.packages_distributions()
    runtime = set(RUNTIME_LOCK)
    wrong = {}
    for entry in SERVICE_CODE:
        base = ROOT / entry
        for path in [base] if base.is_file() else sorted(base.rglob("*.py")):
            for module in _top_level_imports(path):
                owners = {_name(owner) for owner in distributions.get(module, [])}
                if owners and not owners & runtime:
                    wrong[f"{path.relative_to(ROOT)}: {module}"] = sorted(owners)
    assert wrong == {}
