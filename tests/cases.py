"""The project's test vectors (`tests/vectors/`), plus the workspace's golden cases when present.

`tests/vectors/<name>.json` holds `{"about": ..., "cases": [...]}`: each case
has a `why` (its test id) and the fields its test reads. They are the
workspace's golden cases (`../shared/cases`) in the project's own files, so
a clone runs every rule. Where `../shared/cases` exists beside the project,
its cases are read too as an extra check: any whose content (all but `why`)
is not already a vector runs as well, with the id `shared: <why>`.

This is the one module that reads the workspace folder (tests/project/test_vectors.py
checks it). `SILVIA_SHARED_CASES=<folder>` reads another one; a folder that
does not exist runs the suite as a clone does (docs/testing.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

VECTORS_DIR = Path(__file__).resolve().parent / "vectors"
SHARED_CASES_DIR = Path(
    os.environ.get("SILVIA_SHARED_CASES") or Path(__file__).resolve().parent.parent.parent / "shared" / "cases"
)


def _read(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return json.load(handle)["cases"]


def _content(case: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in case.items() if k != "why"}, sort_keys=True)


def load_cases(name: str, *, shared: bool = True) -> list[dict[str, Any]]:
    """The cases of `tests/vectors/<name>` (`.json` optional), then, unless
    `shared=False`, those of `../shared/cases/<name>` that are not vectors
    already (their `why` prefixed `shared: `). Tests whose assertions count
    or index the cases pass `shared=False`. Raises `FileNotFoundError` when
    the vector file is missing."""
    file_name = name if name.endswith(".json") else f"{name}.json"
    cases = _read(VECTORS_DIR / file_name)
    shared_path = SHARED_CASES_DIR / file_name
    if shared and shared_path.is_file():
        known = {_content(case) for case in cases}
        cases += [
            {**case, "why": f"shared: {case.get('why')}"} for case in _read(shared_path) if _content(case) not in known
        ]
    return cases


def case_ids(cases: list[dict[str, Any]]) -> list[str]:
    """Test ids for `cases`: each case's `why`."""
    return [str(case.get("why", index)) for index, case in enumerate(cases)]


def golden_params(cases: list[dict[str, Any]]) -> list[Any]:
    """`pytest.param`s for `parametrize`, one per case with its `why` as id."""
    return [pytest.param(case, id=why) for case, why in zip(cases, case_ids(cases), strict=True)]


def without_support(citations: list[Any]) -> list[Any]:
    """Inline citations without their `support` key (docs/support.md): the golden cases predate SPEC 15, so a
    test comparing inline citations with them compares the rest; support has cases of its own
    (`tests/vectors/support_turns.json`)."""
    return [
        {key: value for key, value in citation.items() if key != "support"} if isinstance(citation, dict) else citation
        for citation in citations
    ]
