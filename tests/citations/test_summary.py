"""citations.summary.classify_citation: the states the admin counts and filters by (hand-computed)."""

from __future__ import annotations

import pytest

from citations.summary import MALFORMED, UNTYPED, classify_citation


@pytest.mark.parametrize(
    ("entry", "kind"),
    [
        ({"source": "s"}, UNTYPED),
        ({"source": "s", "target": None}, MALFORMED),
        ({"source": "s", "target": {"kind": "weather"}}, MALFORMED),
        ({"source": "s", "target": {"kind": "portfolio"}}, "portfolio"),
        ("not an object", MALFORMED),
        (None, MALFORMED),
    ],
)
def test_classify_citation(entry, kind):
    assert classify_citation(entry)[0] == kind
