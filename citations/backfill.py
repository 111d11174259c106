"""The backfill rule for citations saved before targets existed (docs/backfill.md).

Only what the `source` string alone determines is typed. Account labels need
the rows, and a URL could be a web page or a library document, so both are
left for clients to resolve by `source`/`title`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from citations.citable import (
    ANALYSIS_SOURCE,
    FINNHUB_SOURCE,
    FINNHUB_TICKER_SOURCE_PREFIX,
    LIBRARY_SOURCE_PREFIXES,
    PORTFOLIO_SOURCE,
    valid_ticker,
)
from citations.targets import AnalysisTarget, CitationTarget, MarketDataTarget, PortfolioTarget

__all__ = ["CitationListBackfill", "backfill_citation_list", "backfill_target", "target_for_source"]


def target_for_source(source: object) -> CitationTarget | None:
    """The target a `source` string alone determines (docs/backfill.md table), or `None`.

    `silvia://your-portfolio` -> portfolio; `silvia://market-data/finnhub/<T>`
    with a valid ticker -> market_data (upper-cased); `silvia://market-data/finnhub`
    and `silvia://analysis` -> analysis; a library corpus path (non-empty)
    -> its kind with `url: null`; anything else -> `None`. Never raises.
    """
    if not isinstance(source, str):
        return None
    if source == PORTFOLIO_SOURCE:
        return PortfolioTarget()
    if source in (FINNHUB_SOURCE, ANALYSIS_SOURCE):
        return AnalysisTarget()
    if source.startswith(FINNHUB_TICKER_SOURCE_PREFIX):
        ticker = valid_ticker(source[len(FINNHUB_TICKER_SOURCE_PREFIX) :])
        return None if ticker is None else MarketDataTarget(ticker)
    for prefix, kind in LIBRARY_SOURCE_PREFIXES.items():
        if source.startswith(prefix) and len(source) > len(prefix):
            return kind(None)
    return None


def backfill_target(citation: object) -> CitationTarget | None:
    """The target to add to an old citation, or `None` to leave it as it is (docs/backfill.md).

    `citation` is a stored citation or inline citation (a JSON object).
    Returns `None` when it is not an object, already has a `target` key
    (whatever it holds, even malformed or null), or its `source` determines
    nothing. The caller writes `target.to_json()` under `"target"` and
    changes no other key; running it again then returns `None` (idempotent).
    Never raises.
    """
    if not isinstance(citation, dict) or "target" in citation:
        return None
    return target_for_source(citation.get("source"))


@dataclass(frozen=True, slots=True)
class CitationListBackfill:
    """What `backfill_citation_list` made of one stored list.

    `value` is the list to store: an entry given a target is a new dict with
    the same keys in the same order and `"target"` appended last; every other
    entry is the very object that came in. `typed` is the kind of each target
    added, in list order; `already_typed` counts entries that had a `target`
    key (whatever it held); `left_untyped` those whose source determines nothing.
    """

    value: list[dict[str, Any]]
    typed: tuple[str, ...]
    already_typed: int
    left_untyped: int

    @property
    def changed(self) -> bool:
        return bool(self.typed)


def backfill_citation_list(value: object) -> CitationListBackfill | None:
    """Apply `backfill_target` to every entry of a stored `citations` or
    `inline_citations` value (docs/backfill.md).

    Returns `None` when `value` is not a list of JSON objects (null, an object,
    a string such as double-encoded JSON, or a list holding a non-object):
    the caller leaves such a value exactly as it is. Never raises; the input
    is not mutated.
    """
    if not isinstance(value, list) or not all(isinstance(entry, dict) for entry in value):
        return None
    out: list[dict[str, Any]] = []
    typed: list[str] = []
    already_typed = left_untyped = 0
    for entry in value:
        target = backfill_target(entry)
        if target is not None:
            # `{**entry, ...}` keeps the key order and appends `target` last.
            out.append({**entry, "target": target.to_json()})
            typed.append(target.kind)
            continue
        out.append(entry)
        if "target" in entry:
            already_typed += 1
        else:
            left_untyped += 1
    return CitationListBackfill(out, tuple(typed), already_typed, left_untyped)
