"""The backfill rule for citations saved before targets existed (SPEC section 12).

Only what the `source` string alone determines is typed. Account labels need
the rows, and a URL could be a web page or a library document, so both are
left for clients to resolve by `source`/`title`.
"""

from __future__ import annotations

from citations.citable import (
    ANALYSIS_SOURCE,
    FINNHUB_SOURCE,
    FINNHUB_TICKER_SOURCE_PREFIX,
    LIBRARY_SOURCE_PREFIXES,
    PORTFOLIO_SOURCE,
    valid_ticker,
)
from citations.targets import (
    AnalysisTarget,
    CitationTarget,
    MarketDataTarget,
    PortfolioTarget,
)

__all__ = ["backfill_target", "target_for_source"]


def target_for_source(source: object) -> CitationTarget | None:
    """The target a `source` string alone determines (SPEC section 12 table), or `None`.

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
            return kind(None)  # type: ignore[call-arg]
    return None


def backfill_target(citation: object) -> CitationTarget | None:
    """The target to add to an old citation, or `None` to leave it as it is (SPEC section 12).

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
