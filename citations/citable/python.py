"""`execute_python` stdout -> blocks (docs/citable.md#execute_python).

Text (our format): a JSON document (the whole stdout, or one line) is cited
as printed; a sub-item (a ticker object inside a list, a non-article Exa
item, an article without `text`) as JSON; consecutive non-JSON lines form
one text. stderr is never cited.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from citations.citable.blocks import (
    ANALYSIS,
    ANALYSIS_SOURCE,
    ANALYSIS_TITLE,
    FINNHUB_SOURCE,
    FINNHUB_TICKER_SOURCE_PREFIX,
    FINNHUB_TITLE,
    Collector,
    SearchResult,
    is_blank,
    is_http_url,
    json_text,
    nonblank_str,
    valid_ticker,
)
from citations.citable.spec import ToolSpec
from citations.json_checks import expect, optional_str
from citations.targets import MarketDataTarget, WebTarget

__all__ = ["EXECUTE_PYTHON", "check_python_output", "python_blocks"]

# "in any case" means ASCII case: re.ASCII keeps e.g. dotless ı from matching i.
_FINNHUB = re.compile("finnhub", re.IGNORECASE | re.ASCII)
# RFC 8259 whitespace only: str.strip() would also drop e.g. U+00A0.
_JSON_WHITESPACE = " \t\n\r"


class _StrictJSONError(ValueError):
    pass


def _reject_constant(name: str) -> object:
    # json.loads accepts NaN/Infinity/-Infinity; RFC 8259 does not.
    raise _StrictJSONError(name)


def python_blocks(tool_input: Mapping[str, object], output: Mapping[str, object]) -> list[SearchResult]:
    """The blocks of one `execute_python` call (docs/citable.md#execute_python).

    `tool_input` is `{"code": str}`, `output` `{"stdout": str, "stderr": str}`;
    a blank or missing stdout gives no blocks. Never raises.
    """
    stdout = output.get("stdout")
    if not isinstance(stdout, str) or is_blank(stdout):
        return []
    code = tool_input.get("code")
    finnhub = _FINNHUB.search(stdout) is not None or (isinstance(code, str) and _FINNHUB.search(code) is not None)
    rest_source, rest_title = (FINNHUB_SOURCE, FINNHUB_TITLE) if finnhub else (ANALYSIS_SOURCE, ANALYSIS_TITLE)
    blocks = Collector()

    def rest(text: str) -> None:
        blocks.add(rest_source, rest_title, text, ANALYSIS)

    def ticker_block(ticker: str, text: str) -> None:
        blocks.add(FINNHUB_TICKER_SOURCE_PREFIX + ticker, f"{ticker} market data", text, MarketDataTarget(ticker))

    for document, text in _stdout_pieces(stdout):
        if document is None:
            rest(text)
        elif _is_empty_document(document):
            continue
        elif isinstance(document, dict) and (articles := _exa_articles(document)) is not None:
            for item in articles:
                url = item.get("url") if isinstance(item, dict) else None
                if is_http_url(url):
                    title = nonblank_str(item.get("title")) or url
                    body = nonblank_str(item.get("text")) or json_text(item)
                    blocks.add(url, title, body, WebTarget(url))
                elif not _is_empty_document(item):
                    rest(json_text(item))
            others = {k: v for k, v in document.items() if k != "results"}
            if others:
                rest(json_text(others))
        elif finnhub and isinstance(document, list):
            for item in document:
                if _is_empty_document(item):
                    continue
                ticker = _ticker_of(item)
                if ticker is None:
                    rest(json_text(item))
                else:
                    ticker_block(ticker, json_text(item))
        elif finnhub and (ticker := _ticker_of(document)) is not None:
            ticker_block(ticker, text)
        else:
            rest(text)
    return blocks.results()


def _parse_document(text: str) -> object | None:
    """`text` as a strict-JSON object or list, else `None`."""
    stripped = text.strip(_JSON_WHITESPACE)
    if not stripped or stripped[0] not in "[{":
        return None  # cheap: scalars and prose never start with a bracket
    try:
        value = json.loads(stripped, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, (dict, list)) else None


def _stdout_pieces(stdout: str) -> list[tuple[object | None, str]]:
    """stdout as (document or None, text) pieces in order.

    The whole stdout is one document if it parses to an object or list;
    else each line that does is a document, and runs of other lines are text.
    """
    document = _parse_document(stdout)
    if document is not None:
        return [(document, stdout.strip(_JSON_WHITESPACE))]
    pieces: list[tuple[object | None, str]] = []
    run: list[str] = []
    for line in stdout.split("\n"):
        document = _parse_document(line)
        if document is None:
            run.append(line)
            continue
        if run:
            pieces.append((None, "\n".join(run).strip("\r\n")))
            run = []
        pieces.append((document, line.strip(_JSON_WHITESPACE)))
    if run:
        pieces.append((None, "\n".join(run).strip("\r\n")))
    return pieces


def _is_empty_document(value: object) -> bool:
    return isinstance(value, (dict, list)) and not value


def _exa_articles(document: object) -> list[Any] | None:
    """The `results` of an Exa-shaped document (a list holding an object with an http(s) `url`)."""
    if not isinstance(document, dict):
        return None
    results = document.get("results")
    if not isinstance(results, list):
        return None
    if not any(isinstance(item, dict) and is_http_url(item.get("url")) for item in results):
        return None
    return results


def _ticker_of(item: object) -> str | None:
    """The valid ticker of an object's `symbol` (else `ticker`) string."""
    if not isinstance(item, dict):
        return None
    value = item.get("symbol")
    if not isinstance(value, str):
        value = item.get("ticker")
    return valid_ticker(value)


# --- the tool, declared once (docs/tools.md#one-spec-per-tool) ---------------


def check_python_output(tool_input: Mapping[str, Any], output: Mapping[str, Any], path: str) -> None:
    """A record's check of what `python_blocks` reads: `stdout` a string, `stderr` a string or null.

    Raises `TurnRecordError` at `path.stdout` or `path.stderr`.
    """
    expect(output.get("stdout"), str, f"{path}.stdout", "a string")
    optional_str(output, "stderr", path)


EXECUTE_PYTHON = ToolSpec(
    name="execute_python",
    input_schema={
        "type": "object",
        "properties": {"code": {"type": "string", "description": "The whole program."}},
        "required": ["code"],
    },
    check_output=check_python_output,
    citable=python_blocks,
    prompt_sources=(
        f"{FINNHUB_TICKER_SOURCE_PREFIX}<TICKER> for a ticker's market data; "
        f"{FINNHUB_SOURCE} for other live data; {ANALYSIS_SOURCE} for computed results"
    ),
)
"""`execute_python` (docs/citable.md#execute_python; its executor: `tools.python.ExecutePythonTool`)."""
