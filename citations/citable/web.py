"""`search_web` output -> blocks, one per result URL (docs/citable.md#search_web).

Text: the result's `text`, else its `title`; a result with neither is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from citations.citable.blocks import Collector, SearchResult, is_http_url, nonblank_str
from citations.citable.spec import ToolSpec
from citations.json_checks import expect, optional_str
from citations.targets import WebTarget

__all__ = ["SEARCH_WEB", "SEARCH_WEB_SOURCE", "SEARCH_WEB_TITLE", "check_search_web_output", "search_web_blocks"]

SEARCH_WEB_SOURCE = "silvia://search/search_web"
SEARCH_WEB_TITLE = "Web search"


def search_web_blocks(tool_input: Mapping[str, object], output: Mapping[str, object]) -> list[SearchResult]:
    """The blocks of one `search_web` output `{"results": [{"url", "title", "text"}, ...]}`.

    A result with an http(s) URL is a `web` block of that URL (results with
    the same URL share it); the others share one untyped
    `silvia://search/search_web` block. The input (the query) is not read.
    Never raises.
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


# --- the tool, declared once (docs/tools.md#one-spec-per-tool) ---------------


def check_search_web_output(tool_input: Mapping[str, Any], output: Mapping[str, Any], path: str) -> None:
    """A record's check of what `search_web_blocks` reads: `results` a list of objects whose `url`,
    `title` and `text` are strings or null. Raises `TurnRecordError` at `path.results[i]...`."""
    results = expect(output.get("results"), list, f"{path}.results", "a list")
    for i, item in enumerate(results):
        result = expect(item, dict, f"{path}.results[{i}]", "an object")
        for key in ("url", "title", "text"):
            optional_str(result, key, f"{path}.results[{i}]")


SEARCH_WEB = ToolSpec(
    name="search_web",
    input_schema={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to search for, in plain words."}},
        "required": ["query"],
    },
    check_output=check_search_web_output,
    citable=search_web_blocks,
    prompt_sources="the page's URL",
)
"""`search_web` (docs/citable.md#search_web; its executor: `tools.search_web.SearchWebTool`)."""
