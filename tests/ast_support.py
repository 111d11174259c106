"""What the source-reading tests share: the apps, in their import order, and the docstrings of a parsed
module, to leave out of a literal search."""

from __future__ import annotations

import ast

#: The apps, lowest first (docs/layout.md#apps-import-downwards): `citations` is the pure domain and
#: imports nothing of ours; `silvia` (settings, URLs) may import any app; `devtools` (the recorded
#: model) is development only, so no app imports it.
APPS = ("citations", "telemetry", "finance", "tools", "chat", "live", "pages", "silvia", "devtools")


def docstring_ids(tree: ast.AST) -> set[int]:
    """`id()` of every docstring constant in `tree` (module, class and function docstrings)."""
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
