"""Target types and `parse_citation_target` (docs/targets.md). Pure: no database."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citations.pooling import account_refs_of, accounts_target, merge_account_refs
from citations.targets import (
    PROVIDERS,
    TARGET_KINDS,
    AccountRef,
    AccountsTarget,
    AccountTarget,
    AnalysisTarget,
    CardDocumentTarget,
    CitationTarget,
    MarketDataTarget,
    MortgageReferenceTarget,
    PortfolioTarget,
    TaxReferenceTarget,
    WebTarget,
    parse_citation_target,
)
from tests.cases import golden_params, load_cases

PARSE_CASES = load_cases("parse_target.json")

PLAID_ID = "FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U"
OTHER_ID = "qozD68xagSpdzNis02f1g3FwR8N8ZJXFRzj2c"
THIRD_ID = "ZtLFsthnkAxRzuUr1nu1CQAWtci7Jytl9ooyT"


def _json(target: CitationTarget | None) -> dict | None:
    return None if target is None else target.to_json()


@pytest.mark.parametrize("case", golden_params(PARSE_CASES))
def test_parse_golden_case(case):
    assert _json(parse_citation_target(case["input"])) == case["expect"]


# --- the kinds -------------------------------------------------------------


ONE_OF_EACH = [
    WebTarget("https://example.org/a"),
    TaxReferenceTarget("https://www.irs.gov/publications/p590a"),
    TaxReferenceTarget(None),
    CardDocumentTarget(None),
    MortgageReferenceTarget("https://www.ecfr.gov/current/title-12/part-1026"),
    MarketDataTarget("AAPL"),
    AnalysisTarget(),
    AccountTarget(PLAID_ID, "plaid"),
    AccountsTarget((AccountRef(PLAID_ID, "snaptrade"), AccountRef(OTHER_ID, None))),
    PortfolioTarget(),
]


def test_every_kind_is_listed_once_in_spec_order():
    assert tuple(dict.fromkeys(t.kind for t in ONE_OF_EACH)) == TARGET_KINDS
    assert len(set(TARGET_KINDS)) == 9


@pytest.mark.parametrize("target", ONE_OF_EACH, ids=lambda t: t.kind)
def test_to_json_writes_kind_first_and_round_trips(target):
    data = target.to_json()
    assert next(iter(data)) == "kind"
    assert data["kind"] == target.kind
    assert parse_citation_target(data) == target


def test_wire_format_is_exactly_the_spec():
    assert AccountTarget(PLAID_ID, "plaid").to_json() == {
        "kind": "account",
        "accountId": PLAID_ID,
        "provider": "plaid",
    }
    assert AccountsTarget((AccountRef(PLAID_ID, None),)).to_json() == {
        "kind": "accounts",
        "accounts": [{"accountId": PLAID_ID, "provider": None}],
    }
    assert TaxReferenceTarget(None).to_json() == {"kind": "tax_reference", "url": None}
    assert MarketDataTarget("AAPL").to_json() == {"kind": "market_data", "ticker": "AAPL"}
    assert AnalysisTarget().to_json() == {"kind": "analysis"}


def test_equality_is_json_equality():
    assert WebTarget("https://a.example") == WebTarget("https://a.example")
    # Same fields, other kind: not equal (their JSON differs in "kind").
    assert TaxReferenceTarget(None) != CardDocumentTarget(None)
    assert WebTarget("https://a.example") != TaxReferenceTarget("https://a.example")
    assert AnalysisTarget() == AnalysisTarget()
    assert AnalysisTarget() != PortfolioTarget()
    # Order of accounts is part of the JSON.
    a, b = AccountRef(PLAID_ID, "plaid"), AccountRef(OTHER_ID, "plaid")
    assert AccountsTarget((a, b)) != AccountsTarget((b, a))
    # A one-ref accounts is not an account.
    assert AccountsTarget((a,)) != AccountTarget(PLAID_ID, "plaid")
    assert len({AnalysisTarget(), AnalysisTarget(), WebTarget("x"), WebTarget("x")}) == 2


def test_targets_are_frozen_and_slotted():
    target = WebTarget("https://a.example")
    with pytest.raises(dataclasses.FrozenInstanceError):
        target.url = "https://b.example"  # type: ignore[misc]
    assert not hasattr(target, "__dict__")
    assert isinstance(target, CitationTarget)


def test_accounts_accepts_a_list_and_stores_a_tuple():
    target = AccountsTarget([AccountRef(PLAID_ID, "plaid")])  # type: ignore[arg-type]
    assert target.accounts == (AccountRef(PLAID_ID, "plaid"),)
    hash(target)


@pytest.mark.parametrize(
    "build",
    [
        lambda: WebTarget(""),
        lambda: WebTarget(None),  # type: ignore[arg-type]
        lambda: TaxReferenceTarget(""),
        lambda: MarketDataTarget(""),
        lambda: AccountTarget("", "plaid"),
        lambda: AccountTarget(PLAID_ID, "Plaid"),  # type: ignore[arg-type]
        lambda: AccountRef(PLAID_ID, "coinbase"),  # type: ignore[arg-type]
        lambda: AccountsTarget(()),
        lambda: AccountsTarget(({"accountId": PLAID_ID},)),  # type: ignore[arg-type]
    ],
)
def test_constructors_refuse_what_would_not_parse_back(build):
    with pytest.raises((TypeError, ValueError)):
        build()


# --- parsing edge cases ----------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {"kind": "account", "accountId": PLAID_ID, "provider": "Plaid"},
        {"kind": "account", "accountId": PLAID_ID, "provider": ["plaid"]},
        {"kind": "account", "accountId": PLAID_ID, "provider": {"x": 1}},
        {"kind": "account", "accountId": PLAID_ID, "provider": True},
    ],
    ids=["case matters", "a list", "an object", "a bool"],
)
def test_unknown_provider_becomes_null_and_keeps_the_account(value):
    assert parse_citation_target(value) == AccountTarget(PLAID_ID, None)


@pytest.mark.parametrize(
    "value",
    [
        {"kind": True},
        {"kind": ["web"]},
        {"kind": {"web": 1}},
        {"kind": "Web", "url": "https://a.example"},
        {"kind": "web", "url": True},
        {"kind": "web", "url": ["https://a.example"]},
        {"kind": "tax_reference", "url": ""},
        {"kind": "tax_reference", "url": 0},
        {"kind": "card_document"},
        {"kind": "mortgage_reference", "url": False},
        {"kind": "market_data"},
        {"kind": "market_data", "ticker": 5},
        {"kind": "account"},
        {"kind": "account", "accountId": ""},
        {"kind": "account", "accountId": 12345678901234567},
        {"kind": "account", "accountId": True},
        {"kind": "accounts"},
        {"kind": "accounts", "accounts": {"accountId": PLAID_ID}},
        {"kind": "accounts", "accounts": [PLAID_ID]},
        {"kind": "accounts", "accounts": [None]},
        {"kind": "accounts", "accounts": "x"},
        ["kind", "web"],
        ("web",),
        5,
        True,
        "portfolio",
    ],
)
def test_malformed_values_parse_to_none(value):
    assert parse_citation_target(value) is None


def test_one_ref_accounts_stays_accounts():
    target = parse_citation_target({"kind": "accounts", "accounts": [{"accountId": PLAID_ID}]})
    assert target == AccountsTarget((AccountRef(PLAID_ID, None),))
    assert target.to_json()["kind"] == "accounts"


def test_extra_keys_are_ignored_everywhere():
    value = {
        "kind": "accounts",
        "note": "x",
        "accounts": [{"accountId": PLAID_ID, "provider": "manual", "mask": "4321"}],
    }
    assert parse_citation_target(value) == AccountsTarget((AccountRef(PLAID_ID, "manual"),))


def test_library_url_may_be_null_but_must_be_present():
    assert parse_citation_target({"kind": "card_document", "url": None}) == CardDocumentTarget(None)
    assert parse_citation_target({"kind": "card_document"}) is None


def test_parsed_singletons_compare_like_fresh_ones():
    assert parse_citation_target({"kind": "analysis"}) == AnalysisTarget()
    assert parse_citation_target({"kind": "portfolio", "x": 1}) == PortfolioTarget()


# --- account pooling -------------------------------------------------------


def test_merge_keeps_first_seen_order_and_one_ref_per_id():
    refs = [
        AccountRef(PLAID_ID, None),
        AccountRef(OTHER_ID, "plaid"),
        AccountRef(PLAID_ID, "manual"),  # null gives way to a known provider
        AccountRef(PLAID_ID, "snaptrade"),  # between two known ones the first stays
        AccountRef(THIRD_ID, None),
        AccountRef(OTHER_ID, None),  # a known provider never gives way to null
    ]
    assert merge_account_refs(refs) == (
        AccountRef(PLAID_ID, "manual"),
        AccountRef(OTHER_ID, "plaid"),
        AccountRef(THIRD_ID, None),
    )
    assert merge_account_refs([]) == ()


def test_accounts_target_is_account_for_one_id_and_accounts_for_several():
    assert accounts_target([AccountRef(PLAID_ID, None), AccountRef(PLAID_ID, "plaid")]) == AccountTarget(
        PLAID_ID, "plaid"
    )
    assert accounts_target([AccountRef(PLAID_ID, "plaid"), AccountRef(OTHER_ID, None)]) == AccountsTarget(
        (AccountRef(PLAID_ID, "plaid"), AccountRef(OTHER_ID, None))
    )
    with pytest.raises(ValueError):
        accounts_target([])


def test_account_refs_of():
    assert account_refs_of(AccountTarget(PLAID_ID, "plaid")) == (AccountRef(PLAID_ID, "plaid"),)
    both = (AccountRef(PLAID_ID, "plaid"), AccountRef(OTHER_ID, None))
    assert account_refs_of(AccountsTarget(both)) == both
    assert account_refs_of(PortfolioTarget()) is None
    assert account_refs_of(None) is None


# --- properties ------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
providers = st.sampled_from([*sorted(PROVIDERS), None, "Plaid", "coinbase"]) | json_scalars
refs_json = st.fixed_dictionaries(
    {"accountId": st.text(min_size=0, max_size=20) | json_scalars},
    optional={"provider": providers, "extra": json_values},
)
# Values shaped like targets, so the interesting branches are reached often.
target_like = st.fixed_dictionaries(
    {"kind": st.sampled_from(TARGET_KINDS) | json_scalars},
    optional={
        "url": st.none() | st.text(max_size=20) | json_values,
        "ticker": st.text(max_size=12) | json_values,
        "accountId": st.text(max_size=40) | json_values,
        "provider": providers,
        "accounts": st.lists(refs_json | json_values, max_size=4) | json_values,
        "extra": json_values,
    },
)


@settings(max_examples=200, deadline=None)
@given(target_like | json_values)
def test_parse_never_raises_and_round_trips(value):
    target = parse_citation_target(value)
    if target is not None:
        data = target.to_json()
        assert next(iter(data)) == "kind"
        parsed = parse_citation_target(data)
        assert parsed == target
        assert parsed is not None and parsed.to_json() == data
