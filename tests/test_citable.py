"""Tool output -> search_result blocks with targets (docs/citable.md). Pure: no database."""

from __future__ import annotations

import json

import pytest
from django.utils.text import slugify
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citations import citable
from citations.accounts import account_ref_from_row
from citations.citable import (
    LABEL_COLUMNS,
    LIBRARY_TOOLS,
    RowTexts,
    SearchResult,
    render_sql_row,
    to_citable_content,
    valid_ticker,
)
from citations.pooling import accounts_target
from citations.targets import (
    AccountRef,
    AccountsTarget,
    AnalysisTarget,
    CardDocumentTarget,
    CitationTarget,
    MortgageReferenceTarget,
    PortfolioTarget,
    TaxReferenceTarget,
    parse_citation_target,
)
from tests.cases import golden_params, load_cases

CITABLE_CASES = load_cases("citable.json")

PLAID_ID = "FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U"
OTHER_ID = "qozD68xagSpdzNis02f1g3FwR8N8ZJXFRzj2c"
SNAPTRADE_ID = "a7b7acbf-11fe-4ce6-b449-69fa337d6741"
PORTFOLIO = "silvia://your-portfolio"


def _summary(results: list[SearchResult]) -> list[dict]:
    return [
        {"source": r.source, "title": r.title, "target": None if r.target is None else r.target.to_json()}
        for r in results
    ]


def _texts(results: list[SearchResult]) -> dict[str, list[str]]:
    return {r.source: list(r.texts) for r in results}


def _assert_well_formed(results: list[SearchResult]) -> None:
    """Every block: a unique source, a str title, at least one text, no blank text."""
    sources = [r.source for r in results]
    assert len(sources) == len(set(sources))
    for result in results:
        assert isinstance(result.source, str) and result.source
        assert isinstance(result.title, str) and result.title
        assert len(result.texts) >= 1
        for text in result.texts:
            assert isinstance(text, str) and text.strip()
        block = result.to_block()
        assert block["content"] and all(part["text"].strip() for part in block["content"])


@pytest.mark.parametrize("case", golden_params(CITABLE_CASES))
def test_citable_golden_case(case):
    results = to_citable_content(case["tool"], case["input"], case["output"])
    assert _summary(results) == case["expect"]
    _assert_well_formed(results)


def test_to_block_is_the_anthropic_search_result_without_target():
    result = SearchResult("silvia://analysis", "Analysis", ("4500",), AnalysisTarget())
    assert result.to_block() == {
        "type": "search_result",
        "source": "silvia://analysis",
        "title": "Analysis",
        "content": [{"type": "text", "text": "4500"}],
        "citations": {"enabled": True},
    }


@pytest.mark.parametrize("tool", ["", "execute_javascript", "EXECUTE_SQL", None, 5, ["execute_sql"]])
def test_unknown_tool_gives_no_blocks(tool):
    assert to_citable_content(tool, {"query": "q"}, {"rows": []}) == []


# --- execute_sql -----------------------------------------------------------


def _sql(rows, **extra):
    return to_citable_content("execute_sql", {"query": "SELECT ..."}, {"rows": rows, **extra})


def test_sql_row_text_format():
    rows = [
        {"account_name": "Credit card", "current_balance": 1250.33},
        {"account_name": "Credit card", "current_balance": 310.0, "mask": None, "closed": False, "open": True},
        {"account_name": "Credit card", "n": 3, "tags": ["a", "é"], "meta": {"k": 1}},
    ]
    assert _texts(_sql(rows)) == {
        "silvia://your-account/credit-card": [
            "account_name: Credit card; current_balance: 1250.33",
            "account_name: Credit card; current_balance: 310.0; mask: null; closed: false; open: true",
            'account_name: Credit card; n: 3; tags: ["a", "é"]; meta: {"k": 1}',
        ]
    }


def test_sql_columns_give_the_order():
    rows = [{"current_balance": 1.5, "extra": "x", "account_name": "Checking"}]
    results = _sql(rows, columns=["account_name", "current_balance", "missing", 7])
    assert list(results[0].texts) == ["account_name: Checking; current_balance: 1.5; extra: x"]
    # Without columns, the row's own order.
    assert list(_sql(rows)[0].texts) == ["current_balance: 1.5; extra: x; account_name: Checking"]
    # A malformed columns value is ignored.
    assert list(_sql(rows, columns="account_name")[0].texts) == [
        "current_balance: 1.5; extra: x; account_name: Checking"
    ]


def test_no_rows_is_the_portfolio_with_a_saying_text():
    [result] = _sql([])
    assert (result.source, result.title, result.target) == (PORTFOLIO, "Your portfolio", PortfolioTarget())
    assert list(result.texts) == ["The query returned no rows."]


@pytest.mark.parametrize(
    "output", [{}, {"rows": None}, {"rows": {"a": 1}}, {"rows": "x"}, {"error": "syntax error"}, None, [], "rows"]
)
def test_sql_without_a_rows_list_gives_no_blocks(output):
    assert to_citable_content("execute_sql", {"query": "q"}, output) == []


def test_rows_without_columns_still_have_a_text():
    [result] = _sql([{}, {}])
    assert result.target == PortfolioTarget()
    assert list(result.texts) == ["The query returned rows without columns."]


def test_label_column_is_the_first_candidate_present_in_any_row():
    rows = [
        {"account_official_name": "Official", "x": 1},
        {"account_display_name": "Display", "x": 2},
    ]
    # account_display_name beats account_official_name although it appears later.
    results = _sql(rows)
    assert _summary(results) == [
        {"source": PORTFOLIO, "title": "Your portfolio", "target": {"kind": "portfolio"}},
        {"source": "silvia://your-account/display", "title": "Display", "target": None},
    ]
    assert LABEL_COLUMNS == ("account_name", "account_display_name", "account_official_name")


@pytest.mark.parametrize(
    ("label", "source", "title"),
    [
        (5, "silvia://your-account/5", "5"),
        (2.5, "silvia://your-account/25", "2.5"),
        (True, "silvia://your-account/true", "True"),
        ("!!!", "silvia://your-account/account", "!!!"),
        ("Café Crème", "silvia://your-account/cafe-creme", "Café Crème"),
        ("  Checking  ", "silvia://your-account/checking", "  Checking  "),
    ],
)
def test_labels_that_are_not_plain_strings(label, source, title):
    [result] = _sql([{"account_name": label, "v": 1}])
    assert (result.source, result.title) == (source, title)


def test_int_and_float_labels_are_different_texts():
    results = _sql([{"account_name": 1, "v": 1}, {"account_name": 1.0, "v": 2}, {"account_name": True, "v": 3}])
    assert [r.source for r in results] == [
        "silvia://your-account/1",
        "silvia://your-account/10",
        "silvia://your-account/true",
    ]


@pytest.mark.parametrize("label", [None, "", "   ", "\t\n"])
def test_null_or_blank_labels_go_to_the_portfolio(label):
    rows = [{"account_name": label, "source": "plaid", "source_account_id": PLAID_ID, "v": 1}]
    [result] = _sql(rows)
    assert (result.source, result.target) == (PORTFOLIO, PortfolioTarget())


def test_a_row_missing_the_label_key_goes_to_the_portfolio():
    rows = [{"account_name": "Checking", "v": 1}, {"v": 2}]
    assert [r.source for r in _sql(rows)] == ["silvia://your-account/checking", PORTFOLIO]


def test_merged_labels_keep_the_first_title():
    rows = [{"account_name": "Roth IRA (Vanguard)"}, {"account_name": "roth ira vanguard"}]
    [result] = _sql(rows)
    assert result.title == "Roth IRA (Vanguard)"
    assert list(result.texts) == ["account_name: Roth IRA (Vanguard)", "account_name: roth ira vanguard"]


def test_group_providers_pool_like_the_registry():
    rows = [
        {"account_name": "Chase", "source_account_id": PLAID_ID},  # provider null
        {"account_name": "Chase", "source_account_id": OTHER_ID, "source": "plaid"},
        {"account_name": "Chase", "source_account_id": PLAID_ID, "source": "plaid"},  # null gives way
        {"account_name": "Chase", "source_account_id": PLAID_ID, "source": "manual"},  # first known stays
    ]
    [result] = _sql(rows)
    assert result.target == AccountsTarget((AccountRef(PLAID_ID, "plaid"), AccountRef(OTHER_ID, "plaid")))


def test_one_row_without_an_account_untypes_the_group_whatever_its_position():
    base = {"account_name": "Chase", "source": "plaid", "source_account_id": PLAID_ID}
    for position in range(3):
        rows = [dict(base) for _ in range(3)]
        rows[position] = {"account_name": "Chase", "source": "plaid"}
        [result] = _sql(rows)
        assert result.target is None


def test_fallback_id_columns_type_the_group():
    rows = [
        {"account_name": "Brokerage", "snaptrade_account_id": SNAPTRADE_ID},
        {"account_name": "Brokerage", "account_id": PLAID_ID},
        {"account_name": "House", "manual_account_uuid": "d1d67b0f-c0fa-4035-a249-067b20c72546"},
    ]
    assert _summary(_sql(rows)) == [
        {
            "source": "silvia://your-account/brokerage",
            "title": "Brokerage",
            "target": {
                "kind": "accounts",
                "accounts": [
                    {"accountId": SNAPTRADE_ID, "provider": "snaptrade"},
                    {"accountId": PLAID_ID, "provider": None},
                ],
            },
        },
        {
            "source": "silvia://your-account/house",
            "title": "House",
            "target": {"kind": "account", "accountId": "d1d67b0f-c0fa-4035-a249-067b20c72546", "provider": "manual"},
        },
    ]


def test_invalid_source_account_id_falls_back_per_row():
    # Same (label, source_account_id, source) but different fallback ids.
    rows = [
        {"account_name": "A", "source_account_id": "bad", "account_id": PLAID_ID},
        {"account_name": "A", "source_account_id": "bad", "account_id": OTHER_ID},
    ]
    [result] = _sql(rows)
    assert result.target == AccountsTarget((AccountRef(PLAID_ID, None), AccountRef(OTHER_ID, None)))


def test_rows_that_are_not_objects_go_to_the_portfolio_as_their_value():
    rows = [{"account_name": "Checking", "v": 1}, 7, "text", None, ["a"]]
    results = _sql(rows)
    assert [r.source for r in results] == ["silvia://your-account/checking", PORTFOLIO]
    assert list(results[1].texts) == ["7", "text", "null", '["a"]']


def test_unhashable_cells_are_fine():
    rows = [
        {"account_name": "A", "source": ["plaid"], "source_account_id": PLAID_ID},
        {"account_name": "B", "source": "plaid", "source_account_id": {"id": PLAID_ID}, "account_id": OTHER_ID},
        {"account_name": ["x"], "v": 1},
    ]
    assert _summary(_sql(rows)) == [
        {"source": "silvia://your-account/a", "title": "A", "target": None},
        {
            "source": "silvia://your-account/b",
            "title": "B",
            "target": {"kind": "account", "accountId": OTHER_ID, "provider": None},
        },
        {"source": "silvia://your-account/x", "title": "['x']", "target": None},
    ]


def test_texts_is_a_list_rendered_on_first_read():
    rows = [{"account_name": "A", "v": 1}, {"account_name": "A", "v": 2}]
    (block,) = _sql(rows)
    rows[1]["v"] = 3  # not rendered yet: the SearchResult docstring says not to do this
    texts = block.texts
    assert type(texts) is list
    assert texts == ["account_name: A; v: 1", "account_name: A; v: 3"]
    texts.append("mine")  # a copy: the block is unchanged
    assert block.texts == ["account_name: A; v: 1", "account_name: A; v: 3"]
    assert json.loads(json.dumps(block.to_block()))["content"][1] == {"type": "text", "text": "account_name: A; v: 3"}


def test_row_texts_behave_as_a_sequence():
    texts = RowTexts([{"v": 1}, {}, {"v": 2}], None, "fallback")
    assert texts == ["v: 1", "v: 2"] and texts == ("v: 1", "v: 2")
    assert texts[-1] == "v: 2" and len(texts) == 2
    assert texts != "v: 1"
    assert RowTexts([{}], None, "fallback") == ["fallback"]


def test_render_sql_row_edge_values():
    assert (
        render_sql_row({"a": float("nan"), "b": float("inf"), "c": 10**20, "d": -0.0})
        == "a: nan; b: inf; c: 100000000000000000000; d: -0.0"
    )
    assert render_sql_row({"big": 10**5000}).startswith("big: 0x")
    assert render_sql_row(None) == "null"


# --- execute_python --------------------------------------------------------


def _py(stdout, code="print(x)", stderr=""):
    return to_citable_content("execute_python", {"code": code}, {"stdout": stdout, "stderr": stderr})


@pytest.mark.parametrize("stdout", ["", "  \n\n", "{}", "[]\n", "{}\n[]\n  \n", None, 5, ["x"]])
def test_blank_stdout_gives_no_block(stdout):
    assert _py(stdout) == []


def test_stderr_is_never_cited():
    assert _py("", stderr="Traceback: finnhub AAPL") == []


def test_text_lines_form_one_analysis_block():
    [result] = _py("Total: 5\nRate: 3%\n")
    assert (result.source, result.title, result.target) == ("silvia://analysis", "Analysis", AnalysisTarget())
    assert list(result.texts) == ["Total: 5\nRate: 3%"]


def test_nan_is_not_json():
    # json.loads would accept NaN; RFC 8259 does not, so it is text.
    [result] = _py('{"symbol": "AAPL", "c": NaN}\n', code="import finnhub")
    assert result.source == "silvia://market-data/finnhub"
    assert list(result.texts) == ['{"symbol": "AAPL", "c": NaN}']
    [result] = _py("[Infinity]")
    assert result.source == "silvia://analysis"


def test_whole_stdout_document_wins_over_lines():
    stdout = json.dumps({"symbol": "MSFT", "c": 1}, indent=2)
    [result] = _py(stdout, code="import finnhub")
    assert result.source == "silvia://market-data/finnhub/MSFT"
    assert list(result.texts) == [stdout]


def test_pieces_keep_their_order_and_share_blocks():
    stdout = "\n".join(
        [
            "Quotes:",
            '{"symbol": "AAPL", "c": 1}',
            "then",
            '{"ticker": "msft", "c": 2}',
            '{"symbol": "AAPL", "c": 3}',
            '{"c": 4}',
            "42",
        ]
    )
    results = _py(stdout, code="import finnhub")
    assert _summary(results) == [
        {"source": "silvia://market-data/finnhub", "title": "Live data", "target": {"kind": "analysis"}},
        {
            "source": "silvia://market-data/finnhub/AAPL",
            "title": "AAPL market data",
            "target": {"kind": "market_data", "ticker": "AAPL"},
        },
        {
            "source": "silvia://market-data/finnhub/MSFT",
            "title": "MSFT market data",
            "target": {"kind": "market_data", "ticker": "MSFT"},
        },
    ]
    assert _texts(results) == {
        "silvia://market-data/finnhub": ["Quotes:", "then", '{"c": 4}', "42"],
        "silvia://market-data/finnhub/AAPL": ['{"symbol": "AAPL", "c": 1}', '{"symbol": "AAPL", "c": 3}'],
        "silvia://market-data/finnhub/MSFT": ['{"ticker": "msft", "c": 2}'],
    }


@pytest.mark.parametrize("where", ["code", "stdout"])
def test_finnhub_in_any_case_in_code_or_stdout(where):
    stdout = '{"symbol": "VTI", "c": 1}'
    results = _py(stdout, code="from FinnHub import Client") if where == "code" else _py(stdout + "\nsource: FINNHUB")
    assert results[0].source == "silvia://market-data/finnhub/VTI"


def test_tickers_need_a_finnhub_call():
    [result] = _py('{"symbol": "AAPL", "c": 1}')
    assert (result.source, result.target) == ("silvia://analysis", AnalysisTarget())


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("AAPL", "AAPL"),
        ("aapl", "AAPL"),
        ("brk.b", "BRK.B"),
        ("BF-B", "BF-B"),
        ("A", "A"),
        ("ABCDEFGHIJ", "ABCDEFGHIJ"),
        ("ABCDEFGHIJK", None),
        ("1AAPL", None),
        (".A", None),
        ("", None),
        ("AA PL", None),
        ("AAPL\n", None),
        ("ÄAPL", None),  # non-ASCII
        ("ß", None),  # "ß".upper() is "SS": still invalid
        ("ﬁ", None),
        ("BINANCE:BTCUSDT", None),
        (5, None),
        (None, None),
    ],
)
def test_valid_ticker(value, expected):
    assert valid_ticker(value) == expected


def test_symbol_else_ticker():
    code = "import finnhub"
    # symbol wins when it is a string
    assert _py('{"symbol": "AAPL", "ticker": "MSFT"}', code=code)[0].source == "silvia://market-data/finnhub/AAPL"
    # a non-string symbol gives way to ticker
    assert _py('{"symbol": 5, "ticker": "MSFT"}', code=code)[0].source == "silvia://market-data/finnhub/MSFT"
    # an invalid symbol string does not fall back to ticker
    assert _py('{"symbol": "BINANCE:BTC", "ticker": "MSFT"}', code=code)[0].source == "silvia://market-data/finnhub"


def test_a_non_finnhub_list_is_one_analysis_text():
    stdout = '[{"symbol": "VTI"}, {"symbol": "BND"}]'
    [result] = _py(stdout)
    assert result.source == "silvia://analysis"
    assert list(result.texts) == [stdout]


def test_finnhub_list_items_without_ticker_go_to_live_data():
    results = _py('[{"symbol": "VTI", "c": 1}, {"c": 2}, {}, 3]', code="import finnhub")
    assert _texts(results) == {
        "silvia://market-data/finnhub/VTI": ['{"symbol": "VTI", "c": 1}'],
        "silvia://market-data/finnhub": ['{"c": 2}', "3"],
    }


def test_exa_and_finnhub_mixed():
    exa = {
        "results": [
            {"url": "https://a.example/x", "title": "A", "text": "alpha"},
            {"url": "ftp://b.example/y", "title": "B", "text": "beta"},
            {"url": "https://a.example/x", "title": "A again", "text": "alpha 2"},
            {"url": "https://c.example/z", "title": "  ", "text": ""},
        ],
        "requestId": "r1",
    }
    stdout = json.dumps(exa) + "\n" + '{"symbol": "AAPL", "c": 1}\n'
    results = _py(stdout, code="import finnhub\nfrom exa_py import Exa")
    assert _summary(results) == [
        {"source": "https://a.example/x", "title": "A", "target": {"kind": "web", "url": "https://a.example/x"}},
        {"source": "silvia://market-data/finnhub", "title": "Live data", "target": {"kind": "analysis"}},
        {
            "source": "https://c.example/z",
            "title": "https://c.example/z",
            "target": {"kind": "web", "url": "https://c.example/z"},
        },
        {
            "source": "silvia://market-data/finnhub/AAPL",
            "title": "AAPL market data",
            "target": {"kind": "market_data", "ticker": "AAPL"},
        },
    ]
    texts = _texts(results)
    assert texts["https://a.example/x"] == ["alpha", "alpha 2"]
    assert texts["silvia://market-data/finnhub"] == [
        '{"url": "ftp://b.example/y", "title": "B", "text": "beta"}',
        '{"requestId": "r1"}',
    ]
    # An article without text is cited as its JSON.
    assert texts["https://c.example/z"] == ['{"url": "https://c.example/z", "title": "  ", "text": ""}']


def test_results_without_any_http_url_are_not_exa():
    stdout = '{"results": [{"url": "ftp://x"}, {"title": "t"}]}'
    [result] = _py(stdout)
    assert result.source == "silvia://analysis"
    assert list(result.texts) == [stdout]


# --- library readers ---------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "prefix", "kind"),
    [
        ("read_tax_authority", "silvia://tax-authority/", TaxReferenceTarget),
        ("read_credit_card_document", "silvia://credit-card-corpus/", CardDocumentTarget),
        ("read_mortgage_authority", "silvia://mortgage-code/", MortgageReferenceTarget),
    ],
)
def test_library_without_url(tool, prefix, kind):
    assert LIBRARY_TOOLS[tool] == (prefix, kind)
    [result] = to_citable_content(tool, {"path": "a/b.md"}, {"path": "a/b.md", "content": "Text", "meta": None})
    assert (result.source, result.title, result.target) == (prefix + "a/b.md", "b.md", kind(None))
    assert list(result.texts) == ["Text"]


def test_library_url_is_humanized_and_http_accepted():
    url = "http://uscode.house.gov/download/releasepoints/us/pl/119/99/xml_usc26@119-99.zip"
    [result] = to_citable_content(
        "read_tax_authority",
        {"path": "usc/26.xml"},
        {"path": "usc/26.xml", "content": "§ 1", "meta": {"source_url": url}},
    )
    page = "https://uscode.house.gov/view.xhtml?path=/prelim@title26&edition=prelim"
    assert (result.source, result.title, result.target) == (page, "26.xml", TaxReferenceTarget(page))


@pytest.mark.parametrize("source_url", ["ftp://x.example/a", "www.irs.gov/p17", "", 5, None, ["https://a.example"]])
def test_library_non_http_url_uses_the_corpus_path(source_url):
    [result] = to_citable_content(
        "read_credit_card_document",
        {},
        {"path": "c.md", "content": "x", "meta": {"source_url": source_url, "title": "T"}},
    )
    assert (result.source, result.title, result.target) == (
        "silvia://credit-card-corpus/c.md",
        "T",
        CardDocumentTarget(None),
    )


def test_library_path_falls_back_to_the_input():
    [result] = to_citable_content("read_mortgage_authority", {"path": "cfr/1026.md"}, {"content": "x", "meta": "junk"})
    assert (result.source, result.title) == ("silvia://mortgage-code/cfr/1026.md", "1026.md")


@pytest.mark.parametrize(
    "output",
    [
        {"path": "a.md", "content": "", "meta": None},
        {"path": "a.md", "content": "   ", "meta": None},
        {"path": "a.md", "meta": None},
        {"path": "a.md", "content": 5},
        {"content": "x", "meta": None},  # no path, no URL
    ],
)
def test_library_without_content_or_name_gives_no_block(output):
    assert to_citable_content("read_tax_authority", {}, output) == []


# --- search_web ----------------------------------------------------------------


def test_search_web_blocks():
    output = {
        "results": [
            {"url": "https://a.example", "title": "A", "text": "one"},
            {"title": "No link", "text": "two"},
            {"url": "https://a.example", "title": "A second title", "text": "three"},
            {"url": "https://b.example", "text": "four"},
            {"url": "https://c.example", "title": "Only a title"},
            {"url": "https://d.example"},  # nothing to cite
            "junk",
            {"url": "mailto:x@example.org", "text": "five"},
        ]
    }
    results = to_citable_content("search_web", {"query": "q"}, output)
    assert _summary(results) == [
        {"source": "https://a.example", "title": "A", "target": {"kind": "web", "url": "https://a.example"}},
        {"source": "silvia://search/search_web", "title": "Web search", "target": None},
        {
            "source": "https://b.example",
            "title": "https://b.example",
            "target": {"kind": "web", "url": "https://b.example"},
        },
        {"source": "https://c.example", "title": "Only a title", "target": {"kind": "web", "url": "https://c.example"}},
    ]
    assert _texts(results) == {
        "https://a.example": ["one", "three"],
        "silvia://search/search_web": ["two", "five"],
        "https://b.example": ["four"],
        "https://c.example": ["Only a title"],
    }


@pytest.mark.parametrize("output", [{}, {"results": None}, {"results": {"url": "https://a"}}, {"results": []}])
def test_search_web_without_results(output):
    assert to_citable_content("search_web", {"query": "q"}, output) == []


# --- properties ----------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=12,
)

ids = st.sampled_from([PLAID_ID, OTHER_ID, SNAPTRADE_ID, "short", "1234567890123456789", PLAID_ID + "\n"])
labels = (
    st.sampled_from(["Checking", "checking", "Credit card", "", " ", "!!!", "Roth IRA (Vanguard)", 1, 1.0, True])
    | json_scalars
)
sql_rows = st.fixed_dictionaries(
    {},
    optional={
        "account_name": labels,
        "account_display_name": labels,
        "source": st.sampled_from(["plaid", "manual", "snaptrade", "coinbase", None, "Plaid"]) | json_values,
        "source_account_id": ids | json_values,
        "snaptrade_account_id": ids,
        "account_uuid": ids,
        "account_id": ids | json_values,
        "current_balance": json_values,
    },
)
sql_outputs = st.fixed_dictionaries(
    {"rows": st.lists(sql_rows | json_values, max_size=8) | json_values},
    optional={
        "columns": st.lists(st.sampled_from(["current_balance", "account_name", "source"]) | json_values, max_size=4)
        | json_values
    },
)
# Rows that keep to the fast path most of the time: dicts, string labels,
# mostly valid ids.
fast_rows = st.lists(
    st.fixed_dictionaries(
        {"account_name": st.sampled_from(["Checking", "checking", "Credit card", " ", "Roth"]) | st.none()},
        optional={
            "source": st.sampled_from(["plaid", "manual", "snaptrade", "coinbase", None]),
            "source_account_id": st.sampled_from([PLAID_ID, OTHER_ID, SNAPTRADE_ID]),
            "account_id": st.sampled_from([PLAID_ID, OTHER_ID]),
            "v": st.integers(),
        },
    ),
    max_size=12,
)

python_stdout = st.lists(
    st.sampled_from(
        [
            '{"symbol": "AAPL", "c": 1}',
            '{"ticker": "vti"}',
            '[{"symbol": "BND"}, {"c": 2}, {}]',
            '{"results": [{"url": "https://a.example", "title": "A", "text": "t"}, {"x": 1}]}',
            '{"results": [{"url": "https://a.example"}]}',
            "{}",
            "[]",
            "NaN",
            '{"c": NaN}',
            "",
            "  ",
            "finnhub",
            "plain text",
        ]
    )
    | st.text(max_size=20)
    | json_values.map(json.dumps),
    max_size=6,
).map("\n".join)

tool_calls = st.one_of(
    st.tuples(st.just("execute_sql"), json_values, sql_outputs | json_values),
    st.tuples(
        st.just("execute_python"),
        st.fixed_dictionaries({}, optional={"code": st.sampled_from(["import finnhub", "x = 1"]) | json_values})
        | json_values,
        st.fixed_dictionaries({}, optional={"stdout": python_stdout | json_values, "stderr": json_values})
        | json_values,
    ),
    st.tuples(
        st.sampled_from(sorted(LIBRARY_TOOLS)),
        st.fixed_dictionaries({}, optional={"path": st.text(max_size=12) | json_values}) | json_values,
        st.fixed_dictionaries(
            {},
            optional={
                "path": st.text(max_size=12) | json_values,
                "content": st.text(max_size=12) | json_values,
                "meta": st.fixed_dictionaries(
                    {},
                    optional={
                        "source_url": st.sampled_from(
                            [
                                "https://www.ecfr.gov/api/versioner/v1/full/current/title-12.xml?part=1026",
                                "https://www.irs.gov/p17",
                                "http://x",
                                "ftp://x",
                            ]
                        )
                        | json_values,
                        "title": json_values,
                    },
                )
                | json_values,
            },
        )
        | json_values,
    ),
    st.tuples(
        st.just("search_web"),
        json_values,
        st.fixed_dictionaries(
            {},
            optional={
                "results": st.lists(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "url": st.sampled_from(["https://a.example", "https://b.example", "nope"]) | json_values,
                            "title": json_values,
                            "text": json_values,
                        },
                    )
                    | json_values,
                    max_size=5,
                )
                | json_values
            },
        )
        | json_values,
    ),
    st.tuples(json_values, json_values, json_values),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tool_calls)
def test_to_citable_content_never_raises_and_blocks_are_well_formed(call):
    tool, tool_input, output = call
    results = to_citable_content(tool, tool_input, output)
    _assert_well_formed(results)
    for result in results:
        if result.target is not None:
            # Every target survives its own wire format.
            assert parse_citation_target(result.target.to_json()) == result.target


def _reference_sql(rows: list) -> list[tuple[str, str, CitationTarget | None]]:
    """docs/citable.md's execute_sql rule written naively, as an oracle."""
    if not rows:
        return [(PORTFOLIO, "Your portfolio", PortfolioTarget())]
    label_column = next((c for c in LABEL_COLUMNS if any(isinstance(r, dict) and c in r for r in rows)), None)
    if label_column is None:
        return [(PORTFOLIO, "Your portfolio", PortfolioTarget())]
    groups: dict[str, dict] = {}
    for row in rows:
        label = row.get(label_column) if isinstance(row, dict) else None
        text = None if label is None else label if isinstance(label, str) else str(label)
        if text is None or not text.strip():
            groups.setdefault(PORTFOLIO, {"title": "Your portfolio", "portfolio": True})
            continue
        group = groups.setdefault(
            "silvia://your-account/" + (slugify(text) or "account"),
            {"title": text, "portfolio": False, "refs": [], "untyped": False},
        )
        ref = account_ref_from_row(row)
        if ref is None:
            group["untyped"] = True
        else:
            group["refs"].append(ref)
    out: list[tuple[str, str, CitationTarget | None]] = []
    for source, group in groups.items():
        target: CitationTarget | None
        if group["portfolio"]:
            target = PortfolioTarget()
        elif group["untyped"] or not group["refs"]:
            target = None
        else:
            target = accounts_target(group["refs"])
        out.append((source, group["title"], target))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(sql_rows | json_values, max_size=10) | fast_rows)
def test_sql_matches_the_naive_rule(rows):
    expected = _reference_sql(rows)
    results = to_citable_content("execute_sql", {}, {"rows": rows})
    assert [(r.source, r.title, r.target) for r in results] == expected
    _assert_well_formed(results)
    # Every row is rendered into exactly one block: none lost, none repeated.
    rendered = [render_sql_row(row) for row in rows] if isinstance(rows, list) else []
    assert (
        sorted(t for r in results for t in r.texts if t != citable.EMPTY_ROWS_TEXT)
        == sorted(t for t in rendered if t.strip())
        or not rows
    )


def test_sql_row_text_leaves_out_the_vendor_and_id_columns():
    # docs/privacy.md: the provider never reaches text a user may see; the
    # golden turns cite exactly this text for these rows.
    rows = [
        {
            "source": "plaid",
            "source_account_id": "FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U",
            "account_name": "Credit card",
            "current_balance": 1250.33,
        },
        {
            "source": "plaid",
            "source_account_id": "qozD68xagSpdzNis02f1g3FwR8N8ZJXFRzj2c",
            "account_name": "Credit card",
            "current_balance": 310.0,
        },
    ]
    (block,) = to_citable_content("execute_sql", {"query": "q"}, {"rows": rows})
    assert list(block.texts) == [
        "account_name: Credit card; current_balance: 1250.33",
        "account_name: Credit card; current_balance: 310.0",
    ]
    assert (
        render_sql_row(
            {
                "account_id": "x" * 20,
                "snaptrade_account_id": "y",
                "manual_account_uuid": "z",
                "account_uuid": "w",
                "balance": 1,
            }
        )
        == "balance: 1"
    )
