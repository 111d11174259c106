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
