"""execute_python's output -> search_result blocks (docs/citable.md#execute_python): analysis text, JSON
documents and lines, Finnhub market data and tickers, Exa results. Pure: no database."""

from __future__ import annotations

import json

import pytest

from citations.citable import to_citable_content, valid_ticker
from citations.targets import AnalysisTarget
from tests.citations.citable_support import _summary, _texts

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
