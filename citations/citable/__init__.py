"""Citable content: tool output -> `search_result` blocks with targets (docs/citable.md).

`to_citable_content(tool_name, tool_input, output)` is the one entry point;
each tool's rule lives in its own module (`sql`, `python`, `library`, `web`),
and `blocks` holds what they share (`SearchResult`, tickers, URLs). It never
raises on JSON-like input: a field of the wrong type counts as absent, and a
tool output it cannot read gives no blocks.

Every text carries non-whitespace characters (the Messages API rejects
blank text blocks); a block with nothing to cite is not emitted.
"""

from __future__ import annotations

from citations.citable.blocks import (
    ANALYSIS_SOURCE,
    ANALYSIS_TITLE,
    FINNHUB_SOURCE,
    FINNHUB_TICKER_SOURCE_PREFIX,
    FINNHUB_TITLE,
    PORTFOLIO_SOURCE,
    PORTFOLIO_TITLE,
    SearchResult,
    is_http_url,
    valid_ticker,
)
from citations.citable.library import LIBRARY_SOURCE_PREFIXES, LIBRARY_TOOLS, library_blocks
from citations.citable.python import python_blocks
from citations.citable.sql import (
    ACCOUNT_SOURCE_PREFIX,
    EMPTY_ROWS_TEXT,
    LABEL_COLUMNS,
    NO_ROWS_TEXT,
    ROUTING_COLUMNS,
    RowTexts,
    render_sql_row,
    sql_blocks,
)
from citations.citable.web import SEARCH_WEB_SOURCE, SEARCH_WEB_TITLE, search_web_blocks

__all__ = [
    "ACCOUNT_SOURCE_PREFIX",
    "ANALYSIS_SOURCE",
    "ANALYSIS_TITLE",
    "EMPTY_ROWS_TEXT",
    "FINNHUB_SOURCE",
    "FINNHUB_TICKER_SOURCE_PREFIX",
    "FINNHUB_TITLE",
    "LABEL_COLUMNS",
    "LIBRARY_SOURCE_PREFIXES",
    "LIBRARY_TOOLS",
    "NO_ROWS_TEXT",
    "PORTFOLIO_SOURCE",
    "PORTFOLIO_TITLE",
    "ROUTING_COLUMNS",
    "SEARCH_WEB_SOURCE",
    "SEARCH_WEB_TITLE",
    "RowTexts",
    "SearchResult",
    "is_http_url",
    "render_sql_row",
    "to_citable_content",
    "valid_ticker",
]


def to_citable_content(tool_name: str, tool_input: object, output: object) -> list[SearchResult]:
    """The `search_result` blocks for one tool call, in order of first appearance (docs/citable.md).

    `tool_input` and `output` are the call's JSON objects. Knows
    `execute_sql`, `execute_python`, `read_tax_authority`,
    `read_credit_card_document`, `read_mortgage_authority` and `search_web`;
    any other tool gives `[]`. A non-object input or output, or a field of
    the wrong type, counts as absent; an output missing its main field
    (`rows`, `stdout`, `results`, `content`) gives `[]`. Blocks sharing a
    source are merged (texts appended, first title kept). Never raises.
    """
    if not isinstance(tool_input, dict):
        tool_input = {}
    if not isinstance(output, dict):
        return []
    if tool_name == "execute_sql":
        return sql_blocks(output)
    if tool_name == "execute_python":
        return python_blocks(tool_input, output)
    if tool_name == "search_web":
        return search_web_blocks(output)
    if isinstance(tool_name, str) and tool_name in LIBRARY_TOOLS:
        return library_blocks(tool_name, tool_input, output)
    return []
