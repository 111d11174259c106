"""`silvia_citation_support_total` (docs/metrics.md, SPEC 15): the inline citations of each stored turn by support
status, for imports and `record_turn` (live turns: tests/live/test_turn_support.py). Counters are compared before
and after (the suite shares one registry)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from prometheus_client import REGISTRY

from chat.services import record_turn
from citations.support import SUPPORT_STATUSES
from tests.support_turns import CASES
from tests.telemetry.metrics_support import EXAMPLES

pytestmark = pytest.mark.django_db


def _counts(path: str) -> dict[str, float]:
    return {
        status: REGISTRY.get_sample_value("silvia_citation_support_total", {"path": path, "status": status}) or 0.0
        for status in (*SUPPORT_STATUSES, "none")
    }


def _moved(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {status: after[status] - before[status] for status in before if after[status] != before[status]}


def test_an_import_counts_its_turns_citations_by_support_once():
    before = _counts("import")
    call_command("import_turns", str(EXAMPLES), "--create-users", stdout=io.StringIO())
    # examples/turns (docs/support.md#the-examples): 44 supported, "your Roth IRA ($18,530.35)" partly
    # supported, the NerdWallet web citation unchecked.
    assert _moved(before, _counts("import")) == {"supported": 44, "partly_supported": 1, "unchecked": 1}
    again = _counts("import")
    call_command("import_turns", str(EXAMPLES), stdout=io.StringIO())  # all skipped: nothing stored, nothing counted
    assert _moved(again, _counts("import")) == {}


def test_record_turn_counts_the_support_cases_citations(maya, django_capture_on_commit_callbacks):
    before = _counts("record")
    with django_capture_on_commit_callbacks(execute=True):  # counted when the turn commits
        for case in CASES:
            record_turn(case["record"])
    # tests/vectors/support_turns.json: 4 + 2 + 1 supported, 1 + 1 partly, 1 unsupported, 1 + 1 unchecked.
    assert _moved(before, _counts("record")) == {
        "supported": 7,
        "partly_supported": 2,
        "unsupported": 1,
        "unchecked": 2,
    }
