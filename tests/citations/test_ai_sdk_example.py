"""examples/ai-sdk: the example client (ask.mjs, its chips.mjs) run against canned turns of citations.ai_sdk, with
the `ai` package package.json pins. Needs node and `npm ci`: skipped without them, failed under CI.
"""

from __future__ import annotations

import subprocess

from citations.ai_sdk import Row, stream_bytes
from tests.ai_sdk_support import ROOT, canned_server, need_node
from tests.citations.test_ai_sdk_client import DONE, IRS, TURN, S

ASK = ROOT / "examples" / "ai-sdk" / "ask.mjs"


def run_ask(server, question):
    env = {"PATH": "/usr/bin:/bin", "SILVIA_URL": server.url, "SILVIA_TOKEN": "test-token", "SILVIA_SESSION": S}
    done = subprocess.run(
        [need_node(), str(ASK), question], capture_output=True, timeout=60, cwd=ROOT, env=env, check=False
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def test_the_example_asks_our_endpoint_and_prints_the_chips_after_the_text_they_cite():
    with canned_server(stream_bytes(TURN)) as server:
        assert run_ask(server, "What is my IRA limit?") == (
            0,
            "Let me look.\n\nThe limit is $7,000 [IRA limits](" + IRS + ") and you hold $5,000 in checking."
            " [Checking](/accounts/CHKaaaaaaaaaaaaaaaaa1)\n",
            "",
        )
    [request] = server.requests
    assert (request["path"], request["body"]) == (
        f"/api/chat/sessions/{S}/turns/?protocol=ai-sdk",
        {"message": "What is my IRA limit?"},
    )
    assert request["headers"]["authorization"] == "Token test-token"


def test_the_examples_chip_of_each_target_kind():
    two = [{"accountId": "CARDaaaaaaaaaaaaaaaa1", "provider": "plaid"}, {"accountId": "a/b c", "provider": None}]
    cited = [
        ("silvia://your-account/credit-card", "Credit card", {"kind": "accounts", "accounts": two}),
        ("silvia://your-portfolio", "Your portfolio", {"kind": "portfolio"}),
        ("silvia://market-data/finnhub/AAPL", "AAPL market data", {"kind": "market_data", "ticker": "AAPL"}),
        ("silvia://market-data/finnhub", "Live data", {"kind": "analysis"}),
        ("silvia://analysis", "Analysis", {"kind": "analysis"}),
        ("silvia://tax-authority/n.md", None, {"kind": "tax_reference", "url": None}),
        ("silvia://your-account/cash", "Cash", {"kind": "account", "accountId": "a/b c", "provider": "manual"}),
        ("https://www.irs.gov/roth", "Roth", None),
        ("silvia://search/search_web", "Web search", None),
    ]
    rows: list[Row] = [TURN[0]]
    for seq, (source, title, target) in enumerate(cited, 2):
        citation = {"source": source, "title": title, "cited_text": "x", "start": 0, "end": 0}
        rows.append((seq, "citation", {"citation": citation if target is None else {**citation, "target": target}}))
    with canned_server(stream_bytes([*rows, (len(rows) + 1, "done", DONE)])) as server:
        assert run_ask(server, "Chips?") == (
            0,
            " [2 accounts] [Your portfolio](/portfolio/) [AAPL] [Live data] [Analysis]"
            " [silvia://tax-authority/n.md] [Cash](/accounts/a%2Fb%20c) [Roth](https://www.irs.gov/roth)"
            " [Web search]\n",
            "",
        )


def test_the_example_says_why_a_turn_failed():
    failure = {"type": "overloaded", "message": "The assistant is busy right now. Please try again in a minute."}
    with canned_server(stream_bytes([TURN[0], (2, "error", {"error": failure})])) as server:
        assert run_ask(server, "Hi") == (1, "\n", failure["message"] + "\n")
