"""The demo's financial data (SPEC 13): securities, and maya's and sam's connections, accounts and holdings.

The ids are the ones `examples/turns` cite (Plaid's 37-character ids,
SnapTrade and manual UUIDs), so the example answers and the demo data agree;
`tests/finance/test_demo.py` checks that every account id the examples'
SQL rows carry is seeded for the same user with the same label and source.
`finance.demo.seed_demo_finance` writes them.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

__all__ = ["CLOSE_AS_OF", "MAYA", "MAYA_CLERK", "SAM", "SAM_CLERK", "SECURITIES"]

D = Decimal

SECURITIES: dict[str, dict[str, Any]] = {
    "FXAIX": {
        "name": "Fidelity 500 Index Fund",
        "type": "mutual fund",
        "exchange": "NASDAQ",
        "close_price": D("229.10"),
    },
    "VOO": {"name": "Vanguard S&P 500 ETF", "type": "etf", "exchange": "NYSE ARCA", "close_price": D("612.30")},
    "AAPL": {"name": "Apple Inc.", "type": "equity", "exchange": "NASDAQ", "close_price": D("268.47")},
    "VTI": {
        "name": "Vanguard Total Stock Market ETF",
        "type": "etf",
        "exchange": "NYSE ARCA",
        "close_price": D("335.18"),
    },
    "VXUS": {
        "name": "Vanguard Total International Stock ETF",
        "type": "etf",
        "exchange": "NASDAQ",
        "close_price": D("71.42"),
    },
    "ETH": {"name": "Ethereum", "type": "crypto", "exchange": "", "close_price": D("3344.00")},
}
CLOSE_AS_OF = dt.date(2026, 11, 27)

MAYA_CLERK = "user_4LxCnzm8KVbyZMvaBhnoCru0ftO"
SAM_CLERK = "user_sgHYdbyXJZBFwTXpKVeBPog9WzG"

# (source, institution, item id, access token, [account fields, with "holdings": [(ticker, quantity, value)]])
MAYA: list[tuple[str, str, str, str, list[dict[str, Any]]]] = [
    (
        "plaid",
        "Chase",
        "eVBnqd8Qm1hNdKk6l9p3XwZr4yLJz7RgMxP2o",
        "access-production-6f2b9c1e-8d4a-4e7b-9a3c-5d1f0e2b7c84",
        [
            {
                "source_account_id": "u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dK",
                "name": "Credit card",
                "display_name": "Sapphire Preferred",
                "official_name": "Chase Sapphire Preferred",
                "type": "credit",
                "subtype": "credit card",
                "mask": "4821",
                "current_balance": D("2318.45"),
                "available_balance": D("9681.55"),
                "credit_limit": D("12000.00"),
                "purchase_apr": D("24.49"),
            },
            {
                "source_account_id": "XuDL7DxtpYlSXpfKtHF4vUCsMehGAkWvj7FAc",
                "name": "Checking",
                "display_name": "Chase Total Checking",
                "official_name": "Chase Total Checking",
                "type": "depository",
                "subtype": "checking",
                "mask": "0392",
                "current_balance": D("4820.17"),
                "available_balance": D("4820.17"),
            },
            {
                "source_account_id": "DNxril3RavGD5MfvJ7NScUykT8C8UBkkpdhiG",
                "name": "Emergency fund",
                "display_name": "Chase Savings",
                "official_name": "Chase Premier Savings",
                "type": "depository",
                "subtype": "savings",
                "mask": "7710",
                "current_balance": D("15000.00"),
                "available_balance": D("15000.00"),
                "interest_rate": D("0.010"),
            },
        ],
    ),
    (
        "plaid",
        "Citi",
        "37LeXSyYV4g6snRoUYA4fXr6nzrvZcmT4a4Ad",
        "access-production-0c7d5e2a-1b9f-4f3e-8e6a-2a7b3c9d4e51",
        [
            {
                "source_account_id": "LzdocJ2isAjIhKtJ0RlgLKOmxgJTeKdNnFRIB",
                "name": "Credit card",
                "display_name": "Double Cash",
                "official_name": "Citi Double Cash",
                "type": "credit",
                "subtype": "credit card",
                "mask": "5530",
                "current_balance": D("611.90"),
                "available_balance": D("7388.10"),
                "credit_limit": D("8000.00"),
                "purchase_apr": D("19.24"),
            },
        ],
    ),
    (
        "plaid",
        "Ally Bank",
        "5y2FibpBV62h9MahWLm52mva5fiI6bGfKFI6m",
        "access-production-93e1f7b2-6c4d-4a8e-b1f9-7e2d5c3a8b60",
        [
            {
                "source_account_id": "AezmOWfSLjl8MU9cdrJRM2jVrVKch3Tz85pkN",
                "name": "Joint checking",
                "display_name": "",
                "official_name": "Ally Interest Checking",
                "type": "depository",
                "subtype": "checking",
                "mask": "2284",
                "current_balance": D("2210.55"),
                "available_balance": D("2210.55"),
                "interest_rate": D("0.100"),
            },
        ],
    ),
    (
        "plaid",
        "Fidelity",
        "9QeWJKY40uvSwMFLZDe1f8rESQedUStPKR0Cz",
        "access-production-4a8c2e6f-9b1d-4c7e-a3f5-8d2b6e0c1a97",
        [
            {
                "source_account_id": "9QeWJKY40uvSwMFLZDe1f8rESQedUStPKR0Cs",
                "name": "401(k)",
                "display_name": "",
                "official_name": "Acme Corp 401(k) Plan",
                "type": "investment",
                "subtype": "401k",
                "current_balance": D("93976.82"),
                "holdings": [("FXAIX", D("410.2"), D("93976.82"))],
            },
        ],
    ),
    (
        "snaptrade",
        "Robinhood",
        "c4f0a9d2-7e1b-4b6a-9c3d-2f8e5a1b7d40",
        "",
        [
            {
                "source_account_id": "9a2ef80f-58ee-4571-b499-8d7c4093f6de",
                "name": "Brokerage",
                "display_name": "",
                "official_name": "Robinhood Individual",
                "type": "investment",
                "subtype": "brokerage",
                "current_balance": D("37538.70"),
                "holdings": [("VOO", D("35"), D("21430.50")), ("AAPL", D("60"), D("16108.20"))],
            },
        ],
    ),
    (
        "snaptrade",
        "Vanguard",
        "e2b7d1c9-3a4f-4e8b-b6d2-9f1c7a5e3b08",
        "",
        [
            {
                "source_account_id": "a268aa87-2607-479d-a050-914a9d33a01c",
                "name": "Roth IRA (Vanguard)",
                "display_name": "",
                "official_name": "Vanguard Roth IRA",
                "type": "investment",
                "subtype": "roth",
                "contributions_ytd": D("3500.00"),
                "current_balance": D("18530.35"),
                "holdings": [("VTI", D("42.5"), D("14245.15")), ("VXUS", D("60"), D("4285.20"))],
            },
        ],
    ),
    (
        "manual",
        "",
        "",
        "",
        [
            {
                "source_account_id": "353c631c-dfd4-4f37-9200-339d068739fa",
                "name": "Home mortgage",
                "display_name": "",
                "official_name": "",
                "type": "loan",
                "subtype": "mortgage",
                "current_balance": D("312450.18"),
                "interest_rate": D("6.875"),
                "origination_date": dt.date(2024, 6, 14),
                "monthly_payment": D("2847.36"),
                "escrow_payment": D("812.40"),
                "escrow_balance": D("1310.55"),
                "remaining_term_months": 330,
            },
            {
                "source_account_id": "5daeb168-bc6a-4711-8b04-10008141df31",
                "name": "Home",
                "display_name": "",
                "official_name": "",
                "type": "property",
                "subtype": "real estate",
                "current_balance": D("485000.00"),
            },
        ],
    ),
    (
        "crypto_wallet",
        "Ethereum",
        "",
        "",
        [
            {
                "source_account_id": "0x52908400098527886E0F7030069857D2E4169EE7",
                "name": "Crypto wallet",
                "display_name": "",
                "official_name": "",
                "type": "crypto",
                "subtype": "wallet",
                "current_balance": D("4180.00"),
                "holdings": [("ETH", D("1.25"), D("4180.00"))],
            },
        ],
    ),
]

SAM: list[tuple[str, str, str, str, list[dict[str, Any]]]] = [
    (
        "plaid",
        "Capital One",
        "q8Zt3XvB1nKm6WcLr0PyHd5Gs9JfE2aUoT4iV",
        "access-production-7b3e9a1d-2c6f-4d8b-a5e7-1f9c3b6d2a84",
        [
            {
                "source_account_id": "NPRVdD53X83RZJzzzzgEOzdmenCkhvMdgaKjI",
                "name": "Venture card",
                "display_name": "",
                "official_name": "Capital One Venture Rewards",
                "type": "credit",
                "subtype": "credit card",
                "mask": "1187",
                "current_balance": D("1240.77"),
                "credit_limit": D("10000.00"),
                "purchase_apr": D("21.99"),
            },
        ],
    ),
    (
        "plaid",
        "Wells Fargo",
        "Hk2Lm9Qr4Tv7Xz1Bc5Df8Gj3Np6Ws0Ya2Ue8Io",
        "access-production-3d9f1b7e-5a2c-4e6b-8f1d-9c4a7e2b5d13",
        [
            {
                "source_account_id": "Ty4Qwb8DwkNhFdnXsiVpzz63FfkCzJr4i0B3J",
                "name": "Everyday checking",
                "display_name": "",
                "official_name": "Wells Fargo Everyday Checking",
                "type": "depository",
                "subtype": "checking",
                "mask": "6402",
                "current_balance": D("3120.40"),
                "available_balance": D("3120.40"),
            },
            {
                "source_account_id": "rTAwR4y9ojfljoQoaF1LlqsajAIxNKu8iS2G8",
                "name": "Savings",
                "display_name": "",
                "official_name": "Wells Fargo Way2Save Savings",
                "type": "depository",
                "subtype": "savings",
                "mask": "6419",
                "current_balance": D("8214.03"),
                "available_balance": D("8214.03"),
                "interest_rate": D("0.400"),
            },
        ],
    ),
    (
        "manual",
        "",
        "",
        "",
        [
            {
                "source_account_id": "1d87cec3-1f72-46ab-b961-fd925d39d0a8",
                "name": "Cash envelope",
                "display_name": "",
                "official_name": "",
                "type": "depository",
                "subtype": "cash",
                "current_balance": D("160.00"),
            },
        ],
    ),
    (
        "snaptrade",
        "Schwab",
        "971b3776-85a5-477a-ac93-7076d87d8e18",
        "",
        [
            {
                "source_account_id": "163488cb-b00e-4067-864d-d2e190b301ff",
                "name": "Brokerage",
                "display_name": "",
                "official_name": "Schwab Individual",
                "type": "investment",
                "subtype": "brokerage",
                "current_balance": D("4360.60"),
                "holdings": [("AAPL", D("10"), D("2684.70")), ("VTI", D("5"), D("1675.90"))],
            },
        ],
    ),
]
