"""The AI SDK stream's source and tool parts (citations/ai_sdk.py, docs/live.md#the-ai-sdk-stream-protocolai-sdk):
one source part per source (source-url when the citation has an http(s) URL) for every target family, a data
part for every citation, tool calls and results as steps and output errors.

Pure: no database, no HTTP. Expected chunk lists are written out by hand."""

from __future__ import annotations

import pytest

from citations.ai_sdk import TOOL_ERROR_TEXT, Row, UIMessageStream, source_part
from tests.citations.ai_sdk_stream_support import (
    CARDS,
    CARDS_TARGET,
    START,
    TWO_STEPS,
    _call,
    _cite,
    _document,
    _input,
    _result,
)


def _url(source, title):
    return {"type": "source-url", "sourceId": source, "url": source, "title": title}


ACCOUNT = {"kind": "account", "accountId": "CHKaaaaaaaaaaaaaaaaa1", "provider": "plaid"}


@pytest.mark.parametrize(
    ("citation", "part"),
    [
        pytest.param(
            _cite("https://example.org/a", {"kind": "web", "url": "https://example.org/a"}),
            _url("https://example.org/a", "T"),
            id="web",
        ),
        pytest.param(
            _cite("https://www.irs.gov/p590a", {"kind": "tax_reference", "url": "https://www.irs.gov/p590a"}),
            _url("https://www.irs.gov/p590a", "T"),
            id="tax_reference with a url",
        ),
        pytest.param(
            _cite("https://ecfr.gov/x", {"kind": "mortgage_reference", "url": "https://ecfr.gov/x"}, title=None),
            {"type": "source-url", "sourceId": "https://ecfr.gov/x", "url": "https://ecfr.gov/x"},
            id="mortgage_reference with a url, null title: no title key",
        ),
        pytest.param(
            _cite("silvia://credit-card-corpus/a.md", {"kind": "card_document", "url": None}),
            _document("silvia://credit-card-corpus/a.md", "T"),
            id="card_document with url null",
        ),
        pytest.param(
            _cite("silvia://tax-authority/n.md", {"kind": "tax_reference", "url": None}, title=None),
            _document("silvia://tax-authority/n.md", "silvia://tax-authority/n.md"),
            id="tax_reference with url null, null title: the source stands in",
        ),
        pytest.param(
            _cite("silvia://your-account/checking", ACCOUNT),
            _document("silvia://your-account/checking", "T"),
            id="account",
        ),
        pytest.param(
            _cite(CARDS, CARDS_TARGET),
            _document(CARDS, "T"),
            id="accounts",
        ),
        pytest.param(
            _cite("silvia://your-portfolio", {"kind": "portfolio"}),
            _document("silvia://your-portfolio", "T"),
            id="portfolio",
        ),
        pytest.param(
            _cite("silvia://market-data/finnhub/AAPL", {"kind": "market_data", "ticker": "AAPL"}),
            _document("silvia://market-data/finnhub/AAPL", "T"),
            id="market_data",
        ),
        pytest.param(
            _cite("silvia://analysis", {"kind": "analysis"}),
            _document("silvia://analysis", "T"),
            id="analysis",
        ),
        pytest.param(
            _cite("silvia://search/search_web"),
            _document("silvia://search/search_web", "T"),
            id="untyped",
        ),
        pytest.param(
            _cite("https://www.irs.gov/roth"),
            _url("https://www.irs.gov/roth", "T"),
            id="untyped with an https source: the source is the url",
        ),
        pytest.param(
            _cite("ftp://example.org/a", {"kind": "web", "url": "ftp://example.org/a"}),
            _document("ftp://example.org/a", "T"),
            id="a url that is not http(s) is no link",
        ),
    ],
)
def test_the_source_part_of_each_target_family(citation, part):
    assert source_part(citation) == part


def test_each_source_is_sent_once_and_every_citation_has_its_data_part():
    web = _cite("https://example.org/a", {"kind": "web", "url": "https://example.org/a"})
    later = {**web, "cited_text": "y", "start": 3, "end": 5}
    rows: list[Row] = [TWO_STEPS[0], (2, "citation", {"citation": web}), (3, "citation", {"citation": later})]
    assert UIMessageStream().feed(rows) == [
        START,
        {"type": "start-step"},
        _url("https://example.org/a", "T"),
        {"type": "data-citation", "data": web},
        {"type": "data-citation", "data": later},
    ]


def test_a_call_after_a_result_starts_the_next_step_and_a_failed_call_is_an_output_error():
    rows: list[Row] = [
        TWO_STEPS[0],
        _call(2, "a"),
        _call(3, "b"),
        _result(4, "a"),
        _result(5, "b", is_error=True),
        _call(6, "c"),
        _result(7, "c"),
        _result(8, "never-called"),
        (9, "text", {"text": "Done."}),
    ]
    assert UIMessageStream().feed(rows) == [
        START,
        {"type": "start-step"},
        _input("a"),
        _input("b"),
        {"type": "tool-output-available", "toolCallId": "a", "output": {"sources": []}},
        {"type": "tool-output-error", "toolCallId": "b", "errorText": TOOL_ERROR_TEXT},
        {"type": "finish-step"},
        {"type": "start-step"},
        _input("c"),
        {"type": "tool-output-available", "toolCallId": "c", "output": {"sources": []}},
        {"type": "finish-step"},
        {"type": "start-step"},
        {"type": "text-start", "id": "text-9"},
        {"type": "text-delta", "id": "text-9", "delta": "Done."},
    ]
    assert TOOL_ERROR_TEXT == "The tool call failed."
