"""What the tests of `to_citable_content` share (docs/citable.md): account ids, the portfolio source, and
the views of its blocks they compare (summaries, texts, the well-formedness every block keeps)."""

from __future__ import annotations

from citations.citable import SearchResult

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
