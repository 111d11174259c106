"""The recorded demo end to end: a live turn whose `execute_sql` runs for real on the
demo data (docs/live.md, docs/sql-tool.md), so the streamed target is the caller's own
cards, and what streamed is what GET returns."""

from __future__ import annotations

import hashlib
import uuid

import pytest
from django.http import StreamingHttpResponse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from devtools.recorded_model import load_scripts
from finance.demo import seed_demo_finance
from tests.factories import UserFactory
from tests.live.live_turns_support import check_events_equal_get
from tests.live_support import parse_sse
from tests.uvicorn_server import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

# maya's two cards in finance/demo_data.py, both labelled "Credit card" in account_name.
SAPPHIRE = "u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dK"
DOUBLE_CASH = "LzdocJ2isAjIhKtJ0RlgLKOmxgJTeKdNnFRIB"


def demo_turn(maya, recorded_model, settings, message):
    """POST `message` as maya on the demo data with the recorded streams and the real
    execute_sql; returns (client, session id, body bytes)."""
    seed_demo_finance(maya=maya, sam=UserFactory.create(username="sam"))
    settings.LIVE_TOOL_FACTORIES = []  # the real execute_sql, not the tests' recorded one
    recorded_model.load(load_scripts(ROOT / "examples" / "recorded"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=maya).key}")
    session_id = uuid.uuid4()
    response = client.post(f"/api/chat/sessions/{session_id}/turns/", {"message": message}, format="json")
    assert response.status_code == 200, response.content
    assert isinstance(response, StreamingHttpResponse)
    return client, session_id, b"".join(response.streaming_content)


def test_recorded_card_balances_turn_types_the_callers_two_cards(maya, recorded_model, settings):
    client, session_id, body = demo_turn(maya, recorded_model, settings, "How much do I owe on my cards?")
    events = parse_sse(body)

    stored = check_events_equal_get(client, session_id, events)
    for citation in stored["inline_citations"]:
        assert citation["source"] == "silvia://your-account/credit-card"
        assert citation["target"] == {
            "kind": "accounts",
            "accounts": [
                {"accountId": SAPPHIRE, "provider": "plaid"},  # first seen: the larger balance
                {"accountId": DOUBLE_CASH, "provider": "plaid"},
            ],
        }
    # Support (docs/support.md), by hand from maya's cards: $2,930.35 = 2318.45 + 611.9; $2,318.45 and
    # $611.90 are the rows'; $17,069.65 = 9681.55 + 7388.1 (available); 15% (a ratio) is no number, sum or
    # difference of theirs. Offsets: "I'll look up your credit cards.\n\nHere is what you owe: " is 55 UTF-16
    # units, and so on.
    rows = "\n".join(
        f"account_name: Credit card; type: credit; current_balance: {balance}; available_balance: {available}"
        for balance, available in (("2318.45", "9681.55"), ("611.9", "7388.1"))
    )
    digest = "sha256:" + hashlib.sha256(rows.encode()).hexdigest()
    supported = {"status": "supported", "unmatched": [], "digest": digest}
    partly = {"status": "partly_supported", "unmatched": [{"text": "15%", "start": 221, "end": 224}], "digest": digest}
    assert [(c["start"], c["end"], c["support"]) for c in stored["inline_citations"]] == [
        (55, 93, supported),
        (95, 136, supported),
        (158, 232, partly),
    ]
    assert stored["response"][221:224] == "15%"
    # The model got the rows of the real query as search_result blocks; none of sam's.
    tool_result = recorded_model.requests[1]["messages"][-1]["content"][0]
    sources = [block["source"] for block in tool_result["content"]]
    assert sources == ["silvia://your-account/credit-card"]


def test_a_live_turn_with_debug_logging_logs_no_account_id(maya, recorded_model, settings, debug_log, capfd):
    client, session_id, body = demo_turn(maya, recorded_model, settings, "How much do I owe on my cards?")
    assert SAPPHIRE in body.decode()  # the ids streamed to the user, so they could have leaked into a log
    client.get(f"/api/chat/sessions/{session_id}/")

    captured = capfd.readouterr()
    output = "\n".join([debug_log.getvalue(), captured.out, captured.err])
    assert "INSERT INTO" in output  # SQL debug logging was on
    for account_id in (SAPPHIRE, DOUBLE_CASH):
        assert account_id not in output
    assert "current_balance" not in output  # nor the rows the tool returned


def test_a_question_no_stream_matches_gets_the_catch_all(maya, recorded_model, settings):
    _, _, body = demo_turn(maya, recorded_model, settings, "Hello there")
    events = parse_sse(body)
    sources = {data["citation"]["source"] for _, name, data in events if name == "citation"}
    # 90-ira-limits.json, the stream without `match` words, not the first file (10-card-fees).
    assert sources and all("irs.gov" in s or s.startswith("silvia://tax-authority/") for s in sources), sources
