"""What every tool's blocks share (docs/citable.md): `SearchResult`, the
collector that merges blocks by source, and small readers of tickers, URLs
and cell values."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from citations.targets import AnalysisTarget, CitationTarget, PortfolioTarget

__all__ = [
    "ANALYSIS",
    "ANALYSIS_SOURCE",
    "ANALYSIS_TITLE",
    "FINNHUB_SOURCE",
    "FINNHUB_TICKER_SOURCE_PREFIX",
    "FINNHUB_TITLE",
    "PORTFOLIO",
    "PORTFOLIO_SOURCE",
    "PORTFOLIO_TITLE",
    "Collector",
    "SearchResult",
    "is_blank",
    "is_http_url",
    "json_text",
    "nonblank_str",
    "valid_ticker",
    "value_text",
]

PORTFOLIO_SOURCE = "silvia://your-portfolio"
PORTFOLIO_TITLE = "Your portfolio"
ANALYSIS_SOURCE = "silvia://analysis"
ANALYSIS_TITLE = "Analysis"
FINNHUB_SOURCE = "silvia://market-data/finnhub"
FINNHUB_TITLE = "Live data"
FINNHUB_TICKER_SOURCE_PREFIX = FINNHUB_SOURCE + "/"

PORTFOLIO = PortfolioTarget()
ANALYSIS = AnalysisTarget()

# 1 to 10 of A-Z 0-9 . -, starting with a letter. Checked on the upper-cased
# value after an ASCII check: "ß".upper() is "SS", which must not pass.
_TICKER = re.compile(r"[A-Z][A-Z0-9.-]{0,9}")


class SearchResult:
    """One `search_result` block and the target of its source (docs/citable.md).

    `source` and `title` are what the model's citations echo back. `texts` is
    a non-empty `list[str]` of non-blank strings, one Anthropic text block
    each (a new list on every read). `target` is the source's target, or
    `None` when the source is untyped. `to_block()` leaves the target out:
    the model never sees it.

    A SQL block renders its row texts on first read of `texts` (or
    `to_block()`), not when the block is made: deriving targets needs none of
    them, and rendering is most of the cost on a 100,000-row result. So the
    tool output must not be changed after `to_citable_content` returned.
    """

    __slots__ = ("_texts", "source", "target", "title")

    def __init__(self, source: str, title: str, texts: Sequence[str], target: CitationTarget | None = None) -> None:
        self.source = source
        self.title = title
        self._texts = texts  # a tuple, or a lazy `sql.RowTexts`
        self.target = target

    @property
    def texts(self) -> list[str]:
        return list(self._texts)

    @property
    def text_sequence(self) -> Sequence[str]:
        """The texts as held, not copied: a tuple, or a SQL block's rows, rendered on first read (docs/support.md)."""
        return self._texts

    def to_block(self) -> dict[str, Any]:
        """The Anthropic `search_result` content block (a new dict)."""
        return {
            "type": "search_result",
            "source": self.source,
            "title": self.title,
            "content": [{"type": "text", "text": text} for text in self._texts],
            "citations": {"enabled": True},
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SearchResult):
            return NotImplemented
        return (self.source, self.title, self.target, self.texts) == (
            other.source,
            other.title,
            other.target,
            other.texts,
        )

    __hash__ = None  # type: ignore[assignment]  # unhashable, as __eq__ is defined (mypy types __hash__ as a method)

    def __repr__(self) -> str:
        # No target or texts: they may hold account ids and the user's rows (docs/privacy.md).
        return f"SearchResult(source={self.source!r}, title={self.title!r})"


def is_blank(text: str) -> bool:
    """Whether `text` is empty or only whitespace."""
    return not text or text.isspace()


class Collector:
    """Blocks in order of first appearance; a repeated source appends its texts.

    The first title (and target) of a source stays; a blank text is dropped.
    """

    __slots__ = ("_blocks",)

    def __init__(self) -> None:
        self._blocks: dict[str, tuple[str, list[str], CitationTarget | None]] = {}

    def add(self, source: str, title: str, text: str, target: CitationTarget | None) -> None:
        if is_blank(text):
            return
        block = self._blocks.get(source)
        if block is None:
            self._blocks[source] = (title, [text], target)
        else:
            block[1].append(text)

    def results(self) -> list[SearchResult]:
        return [
            SearchResult(source, title, tuple(texts), target) for source, (title, texts, target) in self._blocks.items()
        ]


def is_http_url(value: object) -> TypeGuard[str]:
    """Whether `value` is a `str` URL with scheme `http` or `https` and a host.

    The scheme is matched case-insensitively (as URLs define it). Never raises.
    """
    if not isinstance(value, str) or not value[:8].lower().startswith(("http://", "https://")):
        return False
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def valid_ticker(value: object) -> str | None:
    """The upper-cased ticker, or `None` when `value` is not a valid one (docs/citable.md#execute_python).

    Valid: a `str` of 1 to 10 ASCII characters of `A-Z 0-9 . -` once
    upper-cased, starting with a letter. Any non-ASCII character makes it
    invalid. Never raises.
    """
    if not isinstance(value, str) or not value.isascii():
        return None
    ticker = value.upper()
    return ticker if _TICKER.fullmatch(ticker) else None


def nonblank_str(value: object) -> str | None:
    """`value` when it is a string with a non-whitespace character, else `None`."""
    return value if isinstance(value, str) and not is_blank(value) else None


def json_text(value: object) -> str:
    """Compact JSON for a nested value (non-ASCII kept); never raises (falls back to `str`)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    except (ValueError, TypeError, RecursionError):
        # Circular or absurdly deep structures cannot come from JSON, but
        # the no-raise promise covers any Python value.
        try:
            return str(value)
        except Exception:  # last resort for a hostile __str__
            return f"<{type(value).__name__}>"


def value_text(value: object) -> str:
    """A cell as text: strings as-is, `null`, `true`/`false`, numbers as Python
    prints them (`310.0`, `nan`), objects and lists as JSON. Never raises."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        try:
            return str(value)
        except ValueError:  # an int over Python's int-to-str digit limit
            return hex(int(value))  # only an int overflows str()
    return json_text(value)
