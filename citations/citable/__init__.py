"""Citable content: tool output -> `search_result` blocks with targets (docs/citable.md), and the tools' specs.

Each tool is declared once, by a `ToolSpec` (`spec.py`) in the module
of its block rule (`sql`, `python`, `library`, `web`), and listed once, in
`TOOL_SPECS` (docs/tools.md#one-spec-per-tool). `blocks` holds what the
rules share (`SearchResult`, tickers, URLs).

`to_citable_content(tool_name, tool_input, output)` is the one entry point
for blocks: it runs the tool's `ToolSpec.citable`. It never raises on
JSON-like input: a field of the wrong type counts as absent, and a tool
output it cannot read gives no blocks.

Every text carries non-whitespace characters (the Messages API rejects
blank text blocks); a block with nothing to cite is not emitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

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
from citations.citable.library import LIBRARIES, LIBRARY_SOURCE_PREFIXES, LIBRARY_SPECS, LIBRARY_TOOLS, Library
from citations.citable.python import EXECUTE_PYTHON
from citations.citable.spec import ToolSpec
from citations.citable.sql import (
    ACCOUNT_SOURCE_PREFIX,
    EMPTY_ROWS_TEXT,
    EXECUTE_SQL,
    LABEL_COLUMNS,
    NO_ROWS_TEXT,
    ROUTING_COLUMNS,
    RowTexts,
    render_sql_row,
)
from citations.citable.web import SEARCH_WEB, SEARCH_WEB_SOURCE, SEARCH_WEB_TITLE

__all__ = [
    "ACCOUNT_SOURCE_PREFIX",
    "ANALYSIS_SOURCE",
    "ANALYSIS_TITLE",
    "EMPTY_ROWS_TEXT",
    "EXECUTE_PYTHON",
    "EXECUTE_SQL",
    "FINNHUB_SOURCE",
    "FINNHUB_TICKER_SOURCE_PREFIX",
    "FINNHUB_TITLE",
    "LABEL_COLUMNS",
    "LIBRARIES",
    "LIBRARY_SOURCE_PREFIXES",
    "LIBRARY_SPECS",
    "LIBRARY_TOOLS",
    "NO_ROWS_TEXT",
    "PORTFOLIO_SOURCE",
    "PORTFOLIO_TITLE",
    "ROUTING_COLUMNS",
    "SEARCH_WEB",
    "SEARCH_WEB_SOURCE",
    "SEARCH_WEB_TITLE",
    "TOOL_SPECS",
    "Library",
    "RowTexts",
    "SearchResult",
    "ToolSpec",
    "is_http_url",
    "render_sql_row",
    "to_citable_content",
    "tool_spec",
    "valid_ticker",
]

TOOL_SPECS: Mapping[str, ToolSpec] = MappingProxyType(
    {spec.name: spec for spec in (EXECUTE_SQL, EXECUTE_PYTHON, *LIBRARY_SPECS, SEARCH_WEB)}
)
"""Every tool the domain knows, by name, in the order the v5 prompt and the docs list them
(docs/tools.md#one-spec-per-tool). A tool registers here and nowhere else."""


def tool_spec(name: object) -> ToolSpec | None:
    """The spec of tool `name`, or None for a tool the domain does not know (it gives no citable content)."""
    return TOOL_SPECS.get(name) if isinstance(name, str) else None


def to_citable_content(tool_name: str, tool_input: object, output: object) -> list[SearchResult]:
    """The `search_result` blocks for one tool call, in order of first appearance (docs/citable.md).

    `tool_input` and `output` are the call's JSON objects; the blocks are
    its `ToolSpec.citable` rule's, and a tool not in `TOOL_SPECS` gives
    `[]`. A non-object input or output, or a field of the wrong type,
    counts as absent; an output missing its main field (`rows`, `stdout`,
    `results`, `content`) gives `[]`. Blocks sharing a source are merged
    (texts appended, first title kept). Never raises.
    """
    spec = tool_spec(tool_name)
    if spec is None or not isinstance(output, dict):
        return []
    return spec.citable(tool_input if isinstance(tool_input, dict) else {}, output)
