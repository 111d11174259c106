"""Tool output -> search_result blocks (docs/citable.md): the golden cases of every tool (tests/vectors/
citable.json), the block's wire shape, unknown tools, and the library readers' and search_web's output.
Pure: no database."""

from __future__ import annotations

import pytest

from citations.citable import LIBRARY_TOOLS, SearchResult, to_citable_content
from citations.targets import AnalysisTarget, CardDocumentTarget, MortgageReferenceTarget, TaxReferenceTarget
from tests.cases import golden_params, load_cases
from tests.citations.citable_support import _assert_well_formed, _summary, _texts

CITABLE_CASES = load_cases("citable.json")


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
