"""Chips and cited spans (docs/turns.md#what-a-turn-stores and docs/pages.md): `pages.presenters`, no database."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pages.presenters import Chip, ChipLink, CitedSpan, chip_for_citation, cited_spans, readable_file_name, safe_href

PLAID_A = "BxBXxLj1m4HMXBm9WZZmCWVbPjX16EHwv99vp"
PLAID_B = "FN30U5pQwErTyUiOpAsDfGhJkLzXcVbNm1234"


def cite(target=None, *, source="silvia://your-account/credit-card", title="Credit card", cited="balance: 10", **extra):
    entry = {"source": source, "title": title, "cited_text": cited, **extra}
    if target is not None:
        entry["target"] = target
    return entry


def chip(citation, names=None):
    return chip_for_citation(citation, account_names=names or {})


# One row per line of docs/pages.md's table, each expected value written by hand.
@pytest.mark.parametrize(
    ("citation", "names", "expected"),
    [
        pytest.param(
            cite({"kind": "account", "accountId": PLAID_A, "provider": "plaid"}),
            {PLAID_A: "Sapphire Preferred"},
            Chip(
                "account", "Sapphire Preferred", f"/accounts/{PLAID_A}", title="Credit card", cited_text="balance: 10"
            ),
            id="account: the caller's name for it",
        ),
        pytest.param(
            cite({"kind": "account", "accountId": "a b/c", "provider": None}),
            {},
            Chip("account", "Credit card", "/accounts/a%20b%2Fc", title="Credit card", cited_text="balance: 10"),
            id="account unknown to the caller: the title, path encoded as encodeURIComponent",
        ),
        pytest.param(
            cite({"kind": "account", "accountId": PLAID_A}, title=None),
            {},
            Chip("account", "Account", f"/accounts/{PLAID_A}", cited_text="balance: 10"),
            id="account with no name and no title",
        ),
        pytest.param(
            cite({"kind": "portfolio"}, source="silvia://your-portfolio", title="Your portfolio"),
            {},
            Chip("portfolio", "Your portfolio", "/portfolio/", title="Your portfolio", cited_text="balance: 10"),
            id="portfolio",
        ),
        pytest.param(
            cite(
                {"kind": "market_data", "ticker": "AAPL"},
                source="silvia://market-data/finnhub/AAPL",
                title="AAPL market data",
            ),
            {},
            Chip("market_data", "AAPL", title="AAPL market data", cited_text="balance: 10"),
            id="market data: the ticker, no link",
        ),
        pytest.param(
            cite({"kind": "analysis"}, source="silvia://analysis", title="Analysis"),
            {},
            Chip("analysis", "Analysis", title="Analysis", cited_text="balance: 10"),
            id="analysis",
        ),
        pytest.param(
            cite({"kind": "analysis"}, source="silvia://market-data/finnhub", title="Live data"),
            {},
            Chip("analysis", "Live data", title="Live data", cited_text="balance: 10"),
            id="analysis from the Finnhub source is Live data",
        ),
        pytest.param(
            cite(
                {"kind": "web", "url": "https://www.apple.com/newsroom/"},
                source="https://www.apple.com/newsroom/",
                title="Apple news",
            ),
            {},
            Chip(
                "web",
                "Apple news",
                "https://www.apple.com/newsroom/",
                True,
                title="Apple news",
                cited_text="balance: 10",
            ),
            id="web links to its URL",
        ),
        pytest.param(
            cite(
                {"kind": "web", "url": "https://user@www.reuters.com:443/x?q=1"},
                source="https://www.reuters.com/x",
                title=None,
            ),
            {},
            Chip("web", "www.reuters.com", "https://user@www.reuters.com:443/x?q=1", True, cited_text="balance: 10"),
            id="web without title shows the host",
        ),
        pytest.param(
            cite({"kind": "web", "url": "javascript:alert(1)"}, source="javascript:alert(1)", title="Click me"),
            {},
            Chip("web", "Click me", None, False, title="Click me", cited_text="balance: 10"),
            id="a javascript: URL is never a link",
        ),
        pytest.param(
            cite(
                {"kind": "tax_reference", "url": "https://www.irs.gov/p590a"},
                source="https://www.irs.gov/p590a",
                title="Pub 590-A",
            ),
            {},
            Chip(
                "tax_reference",
                "Pub 590-A",
                "https://www.irs.gov/p590a",
                True,
                title="Pub 590-A",
                cited_text="balance: 10",
            ),
            id="library kind with a URL links",
        ),
        pytest.param(
            cite(
                {"kind": "card_document", "url": None}, source="silvia://credit-card-corpus/chase/x.md", title="Pricing"
            ),
            {},
            Chip("card_document", "Pricing", title="Pricing", cited_text="balance: 10"),
            id="library kind with url null: the title, no link",
        ),
        pytest.param(
            cite(
                {"kind": "mortgage_reference", "url": "data:text/html,x"},
                source="silvia://mortgage-code/notes/escrow-shortage.md",
                title=None,
            ),
            {},
            Chip("mortgage_reference", "Escrow shortage", title="Escrow shortage", cited_text="balance: 10"),
            id="library kind with a non-http URL and no title: a label from its path, no link",
        ),
        pytest.param(
            cite(None, source="https://example.org/a", title="Example"),
            {},
            Chip("fallback", "Example", "https://example.org/a", True, title="Example", cited_text="balance: 10"),
            id="untyped with an http source links",
        ),
        pytest.param(
            cite({"kind": "account"}, source="silvia://your-account/checking", title="Checking"),
            {},
            Chip("fallback", "Checking", title="Checking", cited_text="balance: 10"),
            id="malformed account target falls back to the title",
        ),
        pytest.param(
            cite({"kind": "hologram", "url": "https://x.org"}, source="silvia://your-account/checking", title=None),
            {},
            Chip("fallback", "silvia://your-account/checking", cited_text="balance: 10"),
            id="unknown kind without title falls back to the source",
        ),
        pytest.param(
            cite(None, source="JavaScript:alert(1)//https://x", title=None),
            {},
            Chip("fallback", "JavaScript:alert(1)//https://x", cited_text="balance: 10"),
            id="untyped javascript: source is text",
        ),
        pytest.param("not an object", {}, Chip("fallback", "Source"), id="an entry that is not an object"),
        pytest.param(
            {"source": 5, "title": ["x"], "cited_text": None, "target": None},
            {},
            Chip("fallback", "Source"),
            id="wrong types",
        ),
    ],
)
def test_chip_for_citation(citation, names, expected):
    assert chip(citation, names) == expected


def test_accounts_chip_lists_each_account_with_its_name():
    target = {
        "kind": "accounts",
        "accounts": [{"accountId": PLAID_A, "provider": "plaid"}, {"accountId": PLAID_B, "provider": None}],
    }
    result = chip(cite(target), {PLAID_A: "Sapphire Preferred", PLAID_B: "Double Cash"})
    assert result.kind == "accounts"
    assert result.label == "2 accounts"
    assert result.href is None
    assert result.accounts == (
        ChipLink("Sapphire Preferred", f"/accounts/{PLAID_A}"),
        ChipLink("Double Cash", f"/accounts/{PLAID_B}"),
    )


def test_accounts_chip_numbers_names_that_repeat_and_unknown_accounts():
    target = {"kind": "accounts", "accounts": [{"accountId": PLAID_A}, {"accountId": PLAID_B}, {"accountId": "c" * 20}]}
    result = chip(cite(target), {PLAID_A: "Credit card", PLAID_B: "Credit card"})
    assert [link.label for link in result.accounts] == ["Credit card (1)", "Credit card (2)", "Credit card (3 of 3)"]
    assert result.label == "3 accounts"


def test_accounts_chip_with_a_bad_ref_falls_back():
    target = {"kind": "accounts", "accounts": [{"accountId": PLAID_A}, {"accountId": ""}]}
    assert chip(cite(target)).kind == "fallback"


def test_no_provider_reaches_a_chip():
    for provider in ("plaid", "manual", "snaptrade"):
        one = chip(cite({"kind": "account", "accountId": PLAID_A, "provider": provider}))
        many = chip(cite({"kind": "accounts", "accounts": [{"accountId": PLAID_A, "provider": provider}]}))
        assert provider not in repr(one) and provider not in repr(many)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("https://example.org/a?b=c#d", "https://example.org/a?b=c#d"),
        ("HTTP://EXAMPLE.ORG", "HTTP://EXAMPLE.ORG"),
        ("javascript:alert(1)", None),
        (" https://example.org", None),
        ("https://exa\tmple.org", None),
        ("https://example.org/a b", None),
        ("//example.org", None),
        ("ftp://example.org", None),
        ("https://", None),
        (None, None),
        (["https://x.org"], None),
    ],
)
def test_safe_href(value, expected):
    assert safe_href(value) == expected


ANSWER = "💳 You owe $10. Checking has $5."  # 💳 is two UTF-16 code units


def span(start, end, title="Credit card", **extra):
    return cite({"kind": "portfolio"}, title=title, start=start, end=end, **extra)


def test_spans_are_utf16_offsets_turned_into_str_indices():
    # "You owe $10." is UTF-16 units 3..15 and str indices 2..14; "Checking has $5." is 16..32 and 15..31.
    spans, stray = cited_spans(ANSWER, [span(3, 15, "A"), span(16, 32, "B"), span(3, 15, "C")], account_names={})
    assert spans == [
        CitedSpan(Chip("portfolio", "Your portfolio", "/portfolio/", title="A", cited_text="balance: 10"), 2, 14),
        CitedSpan(chip(span(16, 32, "B")), 15, 31),
        CitedSpan(chip(span(3, 15, "C")), 2, 14),
    ]
    assert [ANSWER[s.start : s.end] for s in spans] == ["You owe $10.", "Checking has $5.", "You owe $10."]
    assert stray == []


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"start": 3},
        {"start": "3", "end": "15"},
        {"start": True, "end": 15},
        {"start": 3.0, "end": 15.0},
        {"start": 15, "end": 3},
        {"start": -1, "end": 3},
        {"start": 3, "end": 33},
        {"start": 1, "end": 3},  # inside the 💳 surrogate pair
    ],
    ids=[
        "missing",
        "no end",
        "strings",
        "bool",
        "floats",
        "reversed",
        "negative",
        "past the end",
        "splits a character",
    ],
)
def test_a_bad_span_is_a_stray_chip(bad):
    entry = {**span(0, 0), **bad}
    if "start" not in bad:
        entry.pop("start")
    if "end" not in bad:
        entry.pop("end")
    assert cited_spans(ANSWER, [entry], account_names={}) == ([], [chip(entry)])


@pytest.mark.parametrize("column", [None, {"a": 1}, "text", 5])
def test_inline_column_that_is_not_a_list(column):
    assert cited_spans("Hello", column, account_names={}) == ([], [])


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("ira-deadlines.md", "IRA deadlines"),
        ("escrow-shortage.md", "Escrow shortage"),
        ("roth-ira-income-limits-2026.md", "Roth IRA income limits 2026"),
        ("401k_rules.txt", "401(k) rules"),
        ("1026.43.xml", "1026.43"),
        ("pricing.md", "Pricing"),
        (".md", ".md"),
    ],
)
def test_readable_file_name(name, label):
    assert readable_file_name(name) == label


def test_a_library_document_titled_by_its_file_name_gets_a_readable_label():
    source = "silvia://tax-authority/irs/notes/ira-deadlines.md"
    typed = cite({"kind": "tax_reference", "url": None}, source=source, title="ira-deadlines.md")
    untitled = cite({"kind": "tax_reference", "url": None}, source=source, title=None)
    untyped = cite(None, source=source, title="ira-deadlines.md")
    assert [(c.kind, c.label, c.title) for c in map(chip, (typed, untitled, untyped))] == [
        ("tax_reference", "IRA deadlines", "IRA deadlines"),
        ("tax_reference", "IRA deadlines", "IRA deadlines"),
        ("fallback", "IRA deadlines", "IRA deadlines"),
    ]
    # A real title stays; a file-name title outside the library stays too.
    titled = cite({"kind": "tax_reference", "url": None}, source=source, title="IRA contribution deadlines")
    elsewhere = cite(None, source="silvia://your-account/notes", title="notes.md")
    assert [chip(c).label for c in (titled, elsewhere)] == ["IRA contribution deadlines", "notes.md"]


def test_a_long_label_may_be_cut():
    assert [Chip("web", "x" * n).label_may_be_cut for n in (18, 19)] == [False, True]


@given(st.lists(st.sampled_from(["a", "é", "💳", "😀", "\n", "€"]), max_size=30).map("".join), st.integers(-2, 70))
def test_a_utf16_offset_is_the_str_index_where_the_units_before_it_end(text, offset):
    # By hand: the index after each character, keyed by the UTF-16 units up to it.
    indices, units = {0: 0}, 0
    for index, char in enumerate(text, 1):
        units += 2 if ord(char) > 0xFFFF else 1
        indices[units] = index
    spans, stray = cited_spans(text, [cite({"kind": "portfolio"}, start=offset, end=offset)], account_names={})
    if offset in indices:
        assert [(s.start, s.end) for s in spans] == [(indices[offset], indices[offset])] and stray == []
    else:
        assert spans == [] and len(stray) == 1
