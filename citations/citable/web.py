"""`search_web` output -> blocks, one per result URL (docs/citable.md#search_web).

Text: the result's `text`, else its `title`; a result with neither is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping

from citations.citable.blocks import Collector, SearchResult, is_http_url, nonblank_str
from citations.targets import WebTarget

__all__ = ["SEARCH_WEB_SOURCE", "SEARCH_WEB_TITLE", "search_web_blocks"]

SEARCH_WEB_SOURCE = "silvia://search/search_web"
SEARCH_WEB_TITLE = "Web search"


def search_web_blocks(output: Mapping[str, object]) -> list[SearchResult]:
    """The blocks of one `search_web` output `{"results": [{"url", "title", "text"}, ...]}`.

    A result with an http(s) URL is a `web` block of that URL (results with
    the same URL share it); the others share one untyped
    `silvia://search/search_web` block. Never raises.
    """
    results = output.get("results")
    if not isinstance(results, list):
        return []
    blocks = Collector()
    for result in results:
        if not isinstance(result, dict):
            continue
        title = nonblank_str(result.get("title"))
        text = nonblank_str(result.get("text")) or title
        if text is None:
            continue  # nothing to cite
        url = result.get("url")
        if is_http_url(url):
            blocks.add(url, title or url, text, WebTarget(url))
        else:
            blocks.add(SEARCH_WEB_SOURCE, SEARCH_WEB_TITLE, text, None)
    return blocks.results()
