"""Targets end to end: the tool's rows through `to_citable_content` (SPEC 3, 4, 13)."""

from __future__ import annotations

import pytest

from citations.citable import to_citable_content

SAPPHIRE = "u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dK"
DOUBLE_CASH = "LzdocJ2isAjIhKtJ0RlgLKOmxgJTeKdNnFRIB"


def blocks(tool, user, query):
    tool_input = {"query": query}
    output = tool.run(tool_input, user=user)
    return {
        block.source: (block.title, block.target.to_json() if block.target else None)
        for block in to_citable_content("execute_sql", tool_input, output)
    }


def test_credit_card_label_over_two_cards_is_accounts_with_both(finance_users, sql_tool):
    maya, _ = finance_users
    got = blocks(
        sql_tool,
        maya,
        "SELECT source, source_account_id, account_name, current_balance FROM account_details "
        "WHERE type = 'credit' ORDER BY current_balance DESC",
    )
    assert got == {
        "silvia://your-account/credit-card": (
            "Credit card",
            {
                "kind": "accounts",
                "accounts": [
                    {"accountId": SAPPHIRE, "provider": "plaid"},
                    {"accountId": DOUBLE_CASH, "provider": "plaid"},
                ],
            },
        ),
    }


def test_sapphire_preferred_is_one_account(finance_users, sql_tool):
    maya, _ = finance_users
    got = blocks(
        sql_tool,
        maya,
        "SELECT source, source_account_id, account_display_name, purchase_apr FROM account_details "
        "WHERE account_display_name = 'Sapphire Preferred'",
    )
    assert got == {
        "silvia://your-account/sapphire-preferred": (
            "Sapphire Preferred",
            {"kind": "account", "accountId": SAPPHIRE, "provider": "plaid"},
        )
    }


def test_crypto_wallet_names_no_account(finance_users, sql_tool):
    maya, _ = finance_users
    got = blocks(
        sql_tool,
        maya,
        "SELECT source, source_account_id, account_name, current_balance FROM account_details WHERE type = 'crypto'",
    )
    assert got == {"silvia://your-account/crypto-wallet": ("Crypto wallet", None)}
    got = blocks(
        sql_tool,
        maya,
        "SELECT source, source_account_id, account_id, account_name, ticker FROM holding_details "
        "WHERE security_type = 'crypto'",
    )
    assert got == {"silvia://your-account/crypto-wallet": ("Crypto wallet", None)}


def test_no_id_column_is_untyped_like_legacy(finance_users, sql_tool):
    maya, _ = finance_users
    got = blocks(sql_tool, maya, "SELECT account_name, current_balance FROM account_details WHERE type = 'credit'")
    assert got == {"silvia://your-account/credit-card": ("Credit card", None)}


def test_clerk_id_item_id_and_tokens_never_become_ids(finance_users, sql_tool):
    maya, _ = finance_users
    got = blocks(
        sql_tool,
        maya,
        "SELECT account_name, clerk_id, item_id, access_token FROM account_details WHERE account_name = 'Checking'",
    )
    assert got == {"silvia://your-account/checking": ("Checking", None)}


def test_provider_columns_of_snaptrade_and_manual(finance_users, sql_tool):
    maya, _ = finance_users
    got = blocks(
        sql_tool,
        maya,
        "SELECT snaptrade_account_id, account_name, ticker FROM holding_details WHERE account_name = 'Brokerage'",
    )
    assert got["silvia://your-account/brokerage"][1] == {
        "kind": "account",
        "accountId": "9a2ef80f-58ee-4571-b499-8d7c4093f6de",
        "provider": "snaptrade",
    }
    got = blocks(sql_tool, maya, "SELECT manual_account_uuid, account_name FROM account_details WHERE type = 'loan'")
    assert got == {
        "silvia://your-account/home-mortgage": (
            "Home mortgage",
            {"kind": "account", "accountId": "353c631c-dfd4-4f37-9200-339d068739fa", "provider": "manual"},
        )
    }
    got = blocks(sql_tool, maya, "SELECT account_id, account_name FROM account_details WHERE account_name = 'Checking'")
    assert got["silvia://your-account/checking"][1] == {
        "kind": "account",
        "accountId": "XuDL7DxtpYlSXpfKtHF4vUCsMehGAkWvj7FAc",
        "provider": None,
    }


@pytest.mark.parametrize(
    "query",
    [
        "SELECT sum(current_balance) AS total FROM account_details WHERE type = 'depository'",
        "SELECT source, source_account_id FROM account_details WHERE type = 'nothing'",
    ],
)
def test_no_label_or_no_rows_is_the_portfolio(finance_users, sql_tool, query):
    maya, _ = finance_users
    assert blocks(sql_tool, maya, query) == {"silvia://your-portfolio": ("Your portfolio", {"kind": "portfolio"})}
