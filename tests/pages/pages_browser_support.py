"""What the pages' browser tests share (docs/pages.md): maya's two demo cards, and the targets the recorded
Markdown overview's sources get (tests/markdown_answers.py)."""

from __future__ import annotations

from tests.markdown_answers import CARDS_SOURCE, DEADLINES_SOURCE, IRS_URL

# maya's two cards in finance/demo_data.py, both labelled "Credit card" in account_name.
SAPPHIRE = "u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dK"
DOUBLE_CASH = "LzdocJ2isAjIhKtJ0RlgLKOmxgJTeKdNnFRIB"
OVERVIEW_TARGETS: dict[str, dict[str, object]] = {
    CARDS_SOURCE: {
        "kind": "accounts",
        "accounts": [{"accountId": SAPPHIRE, "provider": "plaid"}, {"accountId": DOUBLE_CASH, "provider": "plaid"}],
    },
    IRS_URL: {"kind": "tax_reference", "url": IRS_URL},
    DEADLINES_SOURCE: {"kind": "tax_reference", "url": None},
}


# Every EventSource the page makes, kept in `window.eventSources` (an init script, before the page's own).
# A CLOSED EventSource never reconnects (the HTML standard: it is "closed" for good), so a test proves that
# nothing reconnects after a turn's end from the sources' state, not by waiting to see no request come.
_KEEP_EVENT_SOURCES_JS = """
(() => {
  const Original = window.EventSource;
  window.eventSources = [];
  window.EventSource = class extends Original {
    constructor(url, init) { super(url, init); window.eventSources.push(this); }
  };
})();
"""
EVERY_EVENT_SOURCE_CLOSED_JS = "window.eventSources.every(source => source.readyState === EventSource.CLOSED)"


def keep_event_sources(page) -> None:
    """Make the page keep its EventSources in `window.eventSources` (call before `page.goto`)."""
    page.add_init_script(_KEEP_EVENT_SOURCES_JS)
