"""Exporting a session (SPEC 16, docs/api.md#exporting-a-session): `GET /api/chat/sessions/<id>/export?format=json|md`,
and `import_turns` taking a `json` export back: every example session (examples/turns) exported, the database
emptied, imported, and GET gives the same body."""

from __future__ import annotations

import io
import json
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from chat.models import ChatLog, ChatSession
from finance.demo import seed_demo_finance
from live.models import LiveTurn
from tests.factories import ChatLogFactory, ChatSessionFactory

CARDS = uuid.UUID("d93ada3e-af5f-4e4e-823c-781fec71f26d")


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def api(username: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user(username))[0].key}")
    return client


def user(username: str):
    return get_user_model().objects.get(username=username)


@pytest.fixture
def examples(db):
    """The demo's turns (examples/turns, as `setup_demo` imports them) and accounts."""
    call_command("import_turns", "examples/turns", create_users=True, stdout=io.StringIO())
    seed_demo_finance(maya=user("maya"), sam=user("sam"))


def test_every_example_session_round_trips_through_an_empty_database(examples, tmp_path):
    sessions = list(ChatSession.objects.select_related("user").order_by("pk"))
    assert len(sessions) == 5
    before, files = {}, []
    for session in sessions:
        owner = api(session.user.username)
        before[session.pk] = body(owner.get(f"/api/chat/sessions/{session.pk}/"))
        exported = owner.get(f"/api/chat/sessions/{session.pk}/export?format=json")
        assert exported.status_code == 200 and exported["Content-Type"] == "application/json"
        data = body(exported)
        assert body(owner.get(f"/api/chat/sessions/{session.pk}/export")) == data  # json is the default; same bytes
        envelope = json.loads(data)
        assert (envelope["format"], envelope["version"], envelope["user"]) == (
            "silvia-chat-export",
            1,
            session.user.username,
        )
        assert envelope["session"] == json.loads(before[session.pk])
        files.append(tmp_path / f"{session.pk}.json")
        files[-1].write_bytes(data)

    ChatLog.objects.all().delete()
    ChatSession.objects.all().delete()
    LiveTurn.objects.all().delete()
    get_user_model().objects.all().delete()

    out, err = io.StringIO(), io.StringIO()
    call_command("import_turns", *map(str, files), create_users=True, stdout=out, stderr=err)
    assert err.getvalue() == ""
    assert out.getvalue().splitlines()[-1].startswith("imported 15, skipped 0, failed 0; citations typed 39 ")
    for session in sessions:
        again = body(api(session.user.username).get(f"/api/chat/sessions/{session.pk}/"))
        assert json.loads(again) == json.loads(before[session.pk])
        assert again == before[session.pk]  # byte for byte, on both databases

    out = io.StringIO()
    call_command("import_turns", *map(str, files), stdout=out)  # again: every row skipped, none touched
    assert out.getvalue().splitlines()[-1].startswith("imported 0, skipped 15, failed 0")


def test_an_export_of_another_users_session_is_refused_whole(examples, tmp_path):
    data = body(api("maya").get(f"/api/chat/sessions/{CARDS}/export"))
    path = tmp_path / "cards.json"
    path.write_bytes(data)
    err = io.StringIO()
    with pytest.raises(CommandError, match="1 record"):
        call_command("import_turns", str(path), user="sam", stdout=io.StringIO(), stderr=err)
    assert f"session.id: session {CARDS} belongs to another user" in err.getvalue()
    assert ChatLog.objects.filter(session_id=CARDS, user=user("sam")).count() == 0


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda e: e.update(version=2), "version: expected 1"),
        (lambda e: e["session"].update(id="x"), "session.id: expected a UUID"),
        (
            lambda e: e["session"]["messages"][1].update(citations="[]"),
            "session.messages[1].citations: expected a list",
        ),
        (lambda e: e["session"]["messages"][0].update(created_at="yesterday"), "session.messages[0].created_at"),
        (lambda e: e["session"]["messages"][2].update(prompt_version="v9"), "session.messages[2].prompt_version"),
    ],
)
def test_a_bad_export_names_its_path_and_writes_nothing(examples, tmp_path, change, path):
    envelope = json.loads(body(api("maya").get(f"/api/chat/sessions/{CARDS}/export")))
    ChatLog.objects.filter(session_id=CARDS).delete()
    ChatSession.objects.filter(pk=CARDS).delete()
    change(envelope)
    file = tmp_path / "bad.json"
    file.write_text(json.dumps(envelope))
    err = io.StringIO()
    with pytest.raises(CommandError, match="1 record"):
        call_command("import_turns", str(file), stdout=io.StringIO(), stderr=err)
    assert f"bad.json:1: {path}" in err.getvalue()
    assert not ChatSession.objects.filter(pk=CARDS).exists()


def test_markdown_resolves_each_citation_for_a_person(examples):
    maya = api("maya")
    response = maya.get(f"/api/chat/sessions/{CARDS}/export?format=md")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="silvia-conversation-{CARDS}.md"'
    text = body(response).decode()
    assert body(maya.get(f"/api/chat/sessions/{CARDS}/export?format=md")).decode() == text  # the same bytes
    assert text.startswith(f"# Card balances\n\nExported from Silvia. Conversation {CARDS}.\n\n## Question 1\n\n")
    assert "*2026-11-03 14:12:09 UTC*\n\n> How much do I owe on my credit cards right now?\n" in text
    # The answer as written, a marker after each cited span, then its footnotes.
    assert "across your two credit cards[^1] ($2,318.45" in text and "$4,820.17[^2] covers" in text
    assert "[^1]: 2 accounts: Sapphire Preferred, Double Cash — “account\\_name: Credit card;" in text
    assert "[^2]: Account: Chase Total Checking — “account\\_name: Checking;" in text
    assert (
        "[^8]: [Citi Double Cash Card rates and fees](<https://www.citi.com/credit-cards/citi-double-cash-credit-card>)"
        in text
    )
    assert "[^7]: Sapphire Preferred pricing and terms — “Penalty APR: up to 29.99% variable" in text
    assert "[^9]: Your portfolio — “net\\_worth: 339485.51”" in text
    assert text.count("\n[^") == 11 and "\n## Question 3\n" in text
    for never in ("plaid", "provider", "accountId", "silvia://"):
        assert never not in text, never
    ids = [
        ref["accountId"]
        for log in ChatLog.objects.filter(session_id=CARDS)
        for c in log.inline_citations
        for ref in (c.get("target") or {}).get("accounts", [c.get("target") or {}])
        if "accountId" in ref
    ]
    assert ids and not any(account_id in text for account_id in ids)


def test_markdown_prints_support_market_data_and_a_span_it_cannot_place(maya, token_client):
    session = ChatSessionFactory.create(user=maya, title="Stocks")
    cited = {"source": "silvia://market-data/finnhub/AAPL", "title": "AAPL market data", "cited_text": "c: 190"}
    ChatLogFactory.create(
        session=session,
        response="AAPL closed at $190 😀 today.",
        citations=[],
        inline_citations=[
            {
                **cited,
                "start": 19,
                "end": 22,
                "target": {"kind": "market_data", "ticker": "AAPL"},
                "support": {"status": "partly_supported", "unmatched": [], "digest": None},
            },
            {
                **cited,
                "start": 5,
                "end": 99,
                "target": {"kind": "web", "url": "javascript:alert(1)"},
                "support": {"status": "bogus"},
            },
        ],
    )
    text = body(token_client.get(f"/api/chat/sessions/{session.pk}/export?format=md")).decode()
    assert "AAPL closed at $190 😀[^1] today.[^2]\n" in text  # UTF-16 offsets; an end past the answer goes last
    assert "[^1]: Market data: AAPL — “c: 190” — Support: partly supported.\n" in text
    assert "[^2]: AAPL market data — “c: 190”\n" in text  # no link but http(s); no unknown status


def test_bad_requests_are_clear_never_a_500(examples):
    maya, sam = api("maya"), api("sam")
    refused = maya.get(f"/api/chat/sessions/{CARDS}/export?format=pdf")
    assert refused.status_code == 400 and refused.json() == {"format": ["Expected one of: json, md."]}
    for client, session_id in ((sam, CARDS), (maya, str(uuid.uuid4())), (maya, "nope")):
        response = client.get(f"/api/chat/sessions/{session_id}/export?format=md")
        assert response.status_code == 404 and response.json() == {"detail": "Not found."}
    assert APIClient().get(f"/api/chat/sessions/{CARDS}/export").status_code == 401
