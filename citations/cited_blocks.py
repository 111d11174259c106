"""Reading what a model's content blocks cite (docs/turns.md#citation-types): the source a citation is
recorded under, and the URLs a `web_search_tool_result` block writes to the registry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from citations.turn import SEARCH_RESULT_LOCATION, WEB_SEARCH_RESULT_LOCATION

__all__ = ["citation_source", "web_search_result_urls"]


def web_search_result_urls(block: Mapping[str, Any]) -> list[str]:
    """The result URLs of a `web_search_tool_result` content block (docs/turns.md#citation-types).

    Its `content` is a list of `web_search_result` objects (each with a
    `url`), or an error object: that gives no URLs. Non-string or empty URLs
    are left out.
    """
    content = block.get("content")
    if not isinstance(content, list):
        return []
    return [
        item["url"]
        for item in content
        if isinstance(item, Mapping) and isinstance(item.get("url"), str) and item["url"]
    ]


def citation_source(citation: Mapping[str, Any]) -> str | None:
    """The source a citation is recorded under (`source`, or `url` for web search).

    None when it is not recorded: another type, or (from a live stream, which
    nothing validated) a source or `cited_text` that is not a string.
    """
    kind = citation.get("type")
    key = "source" if kind == SEARCH_RESULT_LOCATION else "url" if kind == WEB_SEARCH_RESULT_LOCATION else None
    if key is None or not isinstance(citation.get(key), str) or not isinstance(citation.get("cited_text"), str):
        return None
    return citation[key]
