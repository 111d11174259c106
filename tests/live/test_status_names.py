"""A live turn's status is named through `LiveTurnStatus` only, never spelled (docs/live.md, issue 23).

Pure and fast: each module is read with `ast`, nothing is run. A status
literal (a `LiveTurnStatus` value such as `"running"` or `"done"`) counts
where a status is meant:

- a keyword `status=` or a lookup `status__in=` / `status__…=` (a filter, an
  update, a `Q`, a create);
- a dict entry `"status": …` (an update written as a dict);
- a comparison with something named `status` (`turn.status == "done"`,
  `status in ("queued", "running")`);
- an assignment to something named `status` (`turn.status = "failed"`, a
  field's `default=`).

The same words elsewhere are other things and pass: the `done` SSE event
(`EventName.DONE`), an import's `"failed"` count, a field name. Migrations
are frozen history and keep the literals they were written with.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from live.models import LiveTurnStatus
from tests.ast_support import APPS

ROOT = Path(__file__).resolve().parents[2]
SCANNED = (*APPS, "bench")
STATUSES = frozenset(status.value for status in LiveTurnStatus)

# Modules being rewritten whose status literals go with that work (strict: a clean module's entry must go).
# engine18 (issue 18) finished: every module it touched names statuses through LiveTurnStatus.
BEING_REWRITTEN_BY_ENGINE18: frozenset[str] = frozenset()


def _is_status_name(node: ast.expr) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name == "status" or name.endswith("_status")


def _status_literals(node: ast.AST | None) -> Iterator[ast.Constant]:
    """The status strings of a value: a constant, or the constants of a tuple, list or set of them."""
    if node is None:
        return
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    for item in items:
        if isinstance(item, ast.Constant) and item.value in STATUSES:
            yield item


def status_literals(source: str) -> list[tuple[int, str]]:
    """`(line, literal)` for every status literal used as a status in `source` (see the module's list)."""
    found: list[ast.Constant] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.keyword) and node.arg is not None and node.arg.split("__")[0] == "status":
            found.extend(_status_literals(node.value))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "status":
                    found.extend(_status_literals(value))
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_is_status_name(operand) for operand in operands):
                for operand in operands:
                    found.extend(_status_literals(operand))
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is not None and any(_is_status_name(target) for target in targets):
                found.extend(literal for inner in ast.walk(node.value) for literal in _status_literals(inner))
    return sorted({(literal.lineno, str(literal.value)) for literal in found})


def _modules() -> list[str]:
    return [
        path.relative_to(ROOT).as_posix()
        for folder in SCANNED
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def _params() -> list[object]:
    expected_to_fail = pytest.mark.xfail(strict=True, reason="engine18 (issue 18) is rewriting it; delete its entry")
    return [
        pytest.param(module, marks=expected_to_fail) if module in BEING_REWRITTEN_BY_ENGINE18 else module
        for module in _modules()
    ]


@pytest.mark.parametrize("module", _params())
def test_no_live_turn_status_literal(module):
    found = status_literals((ROOT / module).read_text(encoding="utf-8"))
    assert found == [], f"{module}: use LiveTurnStatus, not {found}"


def test_every_module_being_rewritten_still_exists():
    # A module engine18 removes (resume_turns.py) takes its entry with it.
    assert sorted(BEING_REWRITTEN_BY_ENGINE18 - set(_modules())) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('LiveTurn.objects.filter(pk=1, status="running")\n', [(1, "running")]),
        ('qs.filter(status__in=("done", "failed"))\n', [(1, "done"), (1, "failed")]),
        ('qs.update(status="failed", error=None)\n', [(1, "failed")]),
        ('models.Q(status="running")\n', [(1, "running")]),
        ('append(finish={"status": "done"})\n', [(1, "done")]),
        ('if turn.status == "done":\n    pass\n', [(1, "done")]),
        ('done = status in ("done", "failed")\n', [(1, "done"), (1, "failed")]),
        ('turn.status = "failed"\n', [(1, "failed")]),
        ('status = models.CharField(default="running")\n', [(1, "running")]),
        ("qs.filter(status=LiveTurnStatus.RUNNING)\n", []),
        ('emit("done", data)\n', []),
        ('counts["failed"] += 1\n', []),
        ('if name in ("done", "error"):\n    pass\n', []),
        ('values_list("status")\n', []),
    ],
    ids=[
        "filter",
        "lookup",
        "update",
        "Q",
        "dict",
        "comparison",
        "membership",
        "assignment",
        "field default",
        "the enum",
        "event name",
        "a count",
        "event names compared",
        "field name",
    ],
)
def test_the_scan_sees_a_status_where_one_is_meant(source, expected):
    assert status_literals(source) == expected
