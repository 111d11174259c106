"""The turn registry and its checkpoint (docs/registry.md). Pure: no database."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citations.registry import CHECKPOINT_KEY, TurnRegistry
from citations.targets import (
    AccountRef,
    AccountsTarget,
    AccountTarget,
    AnalysisTarget,
    PortfolioTarget,
    TaxReferenceTarget,
    WebTarget,
    parse_citation_target,
)
from tests.cases import golden_params, load_cases

REGISTRY_CASES = load_cases("registry.json")
CHECKPOINT_CASES = load_cases("checkpoints.json")

PLAID_ID = "FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U"
OTHER_ID = "qozD68xagSpdzNis02f1g3FwR8N8ZJXFRzj2c"
CARD = "silvia://your-account/credit-card"


def _json(target):
    return None if target is None else target.to_json()


@pytest.mark.parametrize("case", golden_params(REGISTRY_CASES))
def test_registry_golden_case(case):
    registry = TurnRegistry()
    for source, target in case["writes"]:
        registry.record(source, parse_citation_target(target))
    for source, expected in case["expect"].items():
        assert _json(registry.target_for(source)) == expected


@pytest.mark.parametrize("case", golden_params(REGISTRY_CASES))
def test_registry_golden_case_survives_a_checkpoint_after_every_write(case):
    registry = TurnRegistry()
    for source, target in case["writes"]:
        # Resume from JSON text, as a slice boundary would.
        registry = TurnRegistry.from_checkpoint(json.loads(json.dumps({CHECKPOINT_KEY: registry.to_json()})))
        registry.record(source, parse_citation_target(target))
    for source, expected in case["expect"].items():
        assert _json(registry.target_for(source)) == expected


@pytest.mark.parametrize("case", golden_params(CHECKPOINT_CASES))
def test_checkpoint_golden_case(case):
    registry = TurnRegistry.from_checkpoint(case["checkpoint"])
    for source, expected in case["expect"].items():
        assert _json(registry.target_for(source)) == expected


def test_first_write_of_none_is_stored_and_then_any_typed_write_disagrees():
    registry = TurnRegistry()
    registry.record("s", None)
    registry.record("s", None)
    assert "s" in registry and registry.target_for("s") is None
    registry.record("s", PortfolioTarget())
    assert registry.target_for("s") is None
    assert registry.to_json() == {"s": None}


def test_a_poisoned_account_source_stays_untyped_even_for_accounts():
    registry = TurnRegistry()
    registry.record(CARD, AccountTarget(PLAID_ID, "plaid"))
    registry.record(CARD, WebTarget("https://a.example"))
    registry.record(CARD, AccountTarget(PLAID_ID, "plaid"))
    registry.record(CARD, AccountTarget(OTHER_ID, "plaid"))
    assert registry.target_for(CARD) is None


def test_account_and_accounts_pool_across_kinds():
    registry = TurnRegistry()
    registry.record(CARD, AccountsTarget((AccountRef(PLAID_ID, None),)))
    registry.record(CARD, AccountTarget(PLAID_ID, "manual"))
    # One account left after pooling: it is `account`, even from `accounts`.
    assert registry.target_for(CARD) == AccountTarget(PLAID_ID, "manual")
    registry.record(CARD, AccountTarget(PLAID_ID, "plaid"))  # first known provider stays
    assert registry.target_for(CARD) == AccountTarget(PLAID_ID, "manual")


def test_a_one_ref_accounts_written_twice_is_unchanged():
    registry = TurnRegistry()
    target = AccountsTarget((AccountRef(PLAID_ID, "plaid"),))
    registry.record(CARD, target)
    registry.record(CARD, target)
    assert registry.target_for(CARD) == target


def test_equal_library_targets_change_nothing_and_kinds_disagree():
    registry = TurnRegistry()
    registry.record("u", TaxReferenceTarget("u"))
    registry.record("u", TaxReferenceTarget("u"))
    assert registry.target_for("u") == TaxReferenceTarget("u")
    registry.record("a", AnalysisTarget())
    registry.record("a", PortfolioTarget())
    assert registry.target_for("a") is None


def test_unwritten_and_non_string_sources_have_no_target():
    registry = TurnRegistry()
    assert registry.target_for("silvia://analysis") is None
    assert registry.target_for(None) is None  # type: ignore[arg-type]
    assert registry.target_for(["x"]) is None  # type: ignore[arg-type]
    assert len(registry) == 0


def test_record_refuses_wrong_types():
    registry = TurnRegistry()
    with pytest.raises(TypeError):
        registry.record(5, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        registry.record("s", {"kind": "analysis"})  # type: ignore[arg-type]


def test_to_json_keeps_first_write_order_and_writes_null_for_untyped():
    registry = TurnRegistry()
    registry.record("b", PortfolioTarget())
    registry.record("a", None)
    registry.record("c", WebTarget("https://c.example"))
    registry.record("c", TaxReferenceTarget("https://c.example"))
    assert list(registry.to_json()) == ["b", "a", "c"]
    assert registry.to_json() == {"b": {"kind": "portfolio"}, "a": None, "c": None}
    assert list(registry) == ["b", "a", "c"]


@pytest.mark.parametrize(
    "checkpoint",
    [None, 5, "x", [], {}, {"citationTargets": None}, {"citationTargets": []}, {"citationTargets": "x"}, {"slice": 1}],
)
def test_checkpoints_without_a_registry_resume_empty(checkpoint):
    registry = TurnRegistry.from_checkpoint(checkpoint)
    assert len(registry) == 0
    assert registry.to_json() == {}


def test_malformed_entries_resume_written_untyped():
    registry = TurnRegistry.from_json(
        {
            "silvia://your-portfolio": {"kind": "portfolio"},
            "bad": {"kind": "nonsense"},
            "worse": 5,
            CARD: {"kind": "account", "accountId": PLAID_ID, "provider": "plaid"},
        }
    )
    assert registry.target_for("silvia://your-portfolio") == PortfolioTarget()
    assert "bad" in registry and registry.target_for("bad") is None
    # Written untyped: a later typed write keeps it untyped.
    registry.record("bad", AnalysisTarget())
    assert registry.target_for("bad") is None
    # Account pooling still works after a resume.
    registry.record(CARD, AccountTarget(OTHER_ID, None))
    assert registry.target_for(CARD) == AccountsTarget((AccountRef(PLAID_ID, "plaid"), AccountRef(OTHER_ID, None)))


def test_repr_does_not_leak_targets():
    registry = TurnRegistry()
    registry.record(CARD, AccountTarget(PLAID_ID, "plaid"))
    assert PLAID_ID not in repr(registry)


json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10)
json_values = st.recursive(
    json_scalars,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=10,
)
refs = st.builds(
    AccountRef,
    st.sampled_from([PLAID_ID, OTHER_ID, "ZtLFsthnkAxRzuUr1nu1CQAWtci7Jytl9ooyT"]),
    st.sampled_from(["plaid", "manual", None]),
)
targets = st.one_of(
    st.none(),
    st.just(PortfolioTarget()),
    st.just(AnalysisTarget()),
    st.builds(WebTarget, st.sampled_from(["https://a.example", "https://b.example"])),
    st.builds(TaxReferenceTarget, st.sampled_from(["https://a.example", None])),
    st.builds(lambda r: AccountTarget(r.account_id, r.provider), refs),
    st.builds(AccountsTarget, st.lists(refs, min_size=1, max_size=3).map(tuple)),
)
writes = st.lists(st.tuples(st.sampled_from(["s1", "s2"]), targets), max_size=8)


@settings(max_examples=200, deadline=None)
@given(writes)
def test_resuming_from_a_checkpoint_is_invisible(writes):
    straight = TurnRegistry()
    resumed = TurnRegistry()
    for source, target in writes:
        straight.record(source, target)
        resumed = TurnRegistry.from_json(json.loads(json.dumps(resumed.to_json())))
        resumed.record(source, target)
    assert straight.to_json() == resumed.to_json()
    assert straight == resumed


@settings(max_examples=200, deadline=None)
@given(writes)
def test_a_source_once_untyped_after_a_write_stays_untyped(writes):
    registry = TurnRegistry()
    untyped: set[str] = set()
    for source, target in writes:
        registry.record(source, target)
        if source in untyped:
            assert registry.target_for(source) is None
        if registry.target_for(source) is None:
            untyped.add(source)


@settings(max_examples=200, deadline=None)
@given(
    json_values
    | st.dictionaries(st.text(max_size=6), json_values | targets.map(lambda t: t and t.to_json()), max_size=4)
)
def test_from_json_and_from_checkpoint_never_raise(value):
    TurnRegistry.from_json(value)
    TurnRegistry.from_checkpoint(value)
    TurnRegistry.from_checkpoint({CHECKPOINT_KEY: value})
