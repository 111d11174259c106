"""The source-only rule for old rows (docs/backfill.md). Pure: no database."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citations.backfill import backfill_target, target_for_source
from citations.targets import AnalysisTarget, MarketDataTarget, PortfolioTarget, parse_citation_target
from tests.cases import golden_params, load_cases

BACKFILL_CASES = load_cases("backfill.json")


@pytest.mark.parametrize("case", golden_params(BACKFILL_CASES))
def test_backfill_golden_case(case):
    citation = copy.deepcopy(case["citation"])
    target = backfill_target(citation)
    assert citation == case["citation"]  # the rule never mutates
    if case["expect"] == "KEEP":
        assert "target" in case["citation"]
        assert target is None
    else:
        assert (None if target is None else target.to_json()) == case["expect"]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("silvia://market-data/finnhub/aapl", MarketDataTarget("AAPL")),
        ("silvia://market-data/finnhub/BRK.B", MarketDataTarget("BRK.B")),
        ("silvia://market-data/finnhub/ÄAPL", None),
        ("silvia://market-data/finnhub/TOOLONGTICKER", None),
        ("silvia://market-data/finnhub/", None),
        ("silvia://market-data/finnhub/AAPL/x", None),
        ("silvia://market-data/finnhubX", None),
        ("silvia://analysis/", None),
        ("silvia://your-portfolio/", None),
        ("SILVIA://your-portfolio", None),
        ("silvia://tax-authority/", None),  # no path
        ("silvia://analysis", AnalysisTarget()),
        ("silvia://your-portfolio", PortfolioTarget()),
        ("", None),
        (None, None),
        (5, None),
    ],
)
def test_target_for_source_edges(source, expected):
    assert target_for_source(source) == expected


@pytest.mark.parametrize("citation", [None, "x", [], 5, {"title": "no source"}, {"source": None}, {"source": 5}])
def test_non_citations_are_left_alone(citation):
    assert backfill_target(citation) is None


@pytest.mark.parametrize("existing", [None, {}, {"kind": "portfolio"}, "junk"])
def test_any_existing_target_key_is_kept(existing):
    assert backfill_target({"source": "silvia://your-portfolio", "target": existing}) is None


def _apply(citation: dict) -> dict:
    """What the data migration does with the rule's answer."""
    target = backfill_target(citation)
    return citation if target is None else {**citation, "target": target.to_json()}


sources = st.sampled_from(
    [
        "silvia://your-portfolio",
        "silvia://market-data/finnhub/aapl",
        "silvia://market-data/finnhub",
        "silvia://analysis",
        "silvia://tax-authority/a.md",
        "silvia://credit-card-corpus/b.md",
        "silvia://mortgage-code/c.md",
        "silvia://your-account/checking",
        "https://www.irs.gov/p17",
    ]
) | st.text(max_size=30)
json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
citations = st.fixed_dictionaries(
    {"source": sources | json_scalars},
    optional={"title": json_scalars, "cited_text": json_scalars, "target": json_scalars},
)


@settings(max_examples=200, deadline=None)
@given(citations | json_scalars)
def test_backfill_is_idempotent_and_touches_only_target(citation):
    if not isinstance(citation, dict):
        assert backfill_target(citation) is None
        return
    once = _apply(dict(citation))
    assert {k: v for k, v in once.items() if k != "target"} == {k: v for k, v in citation.items() if k != "target"}
    if "target" in citation:
        assert once == citation
    elif "target" in once:
        assert parse_citation_target(once["target"]) is not None
    assert _apply(dict(once)) == once
