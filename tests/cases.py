"""Golden cases from `../shared/cases` (the workspace's shared folder).

The folder sits beside the project only in the full workspace. In a clone
without it `load_cases` returns `[]`, and `golden_params` gives one skipped
parameter that says why; tests that loop over cases skip themselves when the
list is empty. So the suite still passes in a clone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

CASES_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "cases"
MISSING_REASON = "../shared/cases not found: golden cases are only in the full workspace"


def load_cases(name: str) -> list[dict[str, Any]]:
    """The `cases` list of `../shared/cases/<name>` (`.json` optional); `[]` when absent."""
    file_name = name if name.endswith(".json") else f"{name}.json"
    path = CASES_DIR / file_name
    if not path.is_file():
        return []
    with path.open(encoding="utf-8") as handle:
        return json.load(handle)["cases"]


def case_ids(cases: list[dict[str, Any]]) -> list[str]:
    """Test ids for `cases`: each case's `why`."""
    return [str(case.get("why", index)) for index, case in enumerate(cases)]


def golden_params(cases: list[dict[str, Any]]) -> list[Any]:
    """`pytest.param`s for `parametrize`, one per case with its `why` as id;
    a single skipped parameter (with the reason) when there are no cases."""
    if not cases:
        return [pytest.param(None, id="no-golden-cases", marks=pytest.mark.skip(reason=MISSING_REASON))]
    return [pytest.param(case, id=why) for case, why in zip(cases, case_ids(cases))]
