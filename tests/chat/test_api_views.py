"""The sessions API (docs/api.md): scope, auth, raw JSON, query budget."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from chat.services import record_turn
from tests.cases import load_cases, without_support
from tests.factories import ChatLogFactory, ChatSessionFactory

pytestmark = pytest.mark.django_db
TURNS = load_cases("turns.json", shared=False)  # counted and indexed below


def test_detail_serves_the_golden_turns_as_stored(token_client, maya):
    for case in TURNS:
        record_turn(case["record"])
    session_id = TURNS[0]["record"]["session"]["id"]
    expected = [c for c in TURNS if c["record"]["session"]["id"] == session_id]

    response = token_client.get(f"/api/chat/sessions/{session_id}/")

    assert response.status_code == 200
    body = json.loads(response.content)
    assert body["id"] == session_id
    assert body["title"] == expected[0]["record"]["session"]["title"]
    assert [m["id"] for m in body["messages"]] == [c["record"]["id"] for c in expected]
    for message, case in zip(body["messages"], expected, strict=True):
        assert message["response"] == case["expect"]["response"]
        assert message["citations"] == case["expect"]["citations"]
        assert without_support(message["inline_citations"]) == case["expect"]["inline_citations"]
        assert message["user_message"] == case["record"]["user_message"]
        assert message["prompt_version"] == case["record"]["prompt_version"]
        assert message["model"] == "claude-sonnet-4-5-20250929"
        assert message["created_at"].startswith(case["record"]["created_at"][:19])
    assert set(body["messages"][0]) == {
        "id",
        "user_message",
        "response",
        "citations",
        "inline_citations",
        "prompt_version",
        "model",
        "created_at",
    }


def test_detail_with_and_without_trailing_slash(token_client, maya):
    log = ChatLogFactory.create(session__user=maya)
    for url in (f"/api/chat/sessions/{log.session_id}/", f"/api/chat/sessions/{log.session_id}"):
        response = token_client.get(url)
        assert response.status_code == 200, url
        assert response.json()["messages"][0]["id"] == str(log.id)


def test_stored_json_comes_back_untouched(token_client, maya):
    odd = [
        {"source": "s", "title": None, "cited_text": "c", "target": {"kind": "weather", "city": "Austin"}},
        {"source": "s2", "title": "t", "cited_text": "c", "target": {"kind": "account"}},
        {"source": "s3", "title": "t", "cited_text": "c", "extra": [1, {"b": 2, "a": 1}]},
        {"source": "s4", "title": "日本 💳", "cited_text": "c"},
    ]
    log = ChatLogFactory.create(session__user=maya, citations=odd, inline_citations=[{"legacy": True}])
    body = token_client.get(f"/api/chat/sessions/{log.session_id}/").json()
    assert body["messages"][0]["citations"] == odd
    assert body["messages"][0]["inline_citations"] == [{"legacy": True}]


def test_other_users_missing_and_malformed_ids_are_the_same_404(token_client, other_user):
    theirs = ChatSessionFactory.create(user=other_user)
    responses = [
        token_client.get(f"/api/chat/sessions/{theirs.id}/"),
        token_client.get("/api/chat/sessions/00000000-0000-4000-8000-000000000000/"),
        token_client.get("/api/chat/sessions/not-a-uuid/"),
        token_client.get("/api/chat/sessions/%27%3B--/"),
    ]
    assert [r.status_code for r in responses] == [404, 404, 404, 404]
    assert len({r.content for r in responses}) == 1


def test_no_credentials_is_401_with_www_authenticate(db):
    client = APIClient()
    for url in ("/api/chat/sessions/", "/api/chat/sessions/00000000-0000-4000-8000-000000000000/"):
        response = client.get(url)
        assert response.status_code == 401
        assert response["WWW-Authenticate"] == "Token"


def test_bad_token_is_401(db):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token nope")
    assert client.get("/api/chat/sessions/").status_code == 401


def test_session_auth_works(maya, client):
    client.force_login(maya)
    log = ChatLogFactory.create(session__user=maya)
    assert client.get(f"/api/chat/sessions/{log.session_id}/").status_code == 200
    assert client.get("/api/chat/sessions/").json()["count"] == 1


def test_list_is_the_callers_sessions_newest_first_with_counts(token_client, maya, other_user):
    older = ChatSessionFactory.create(user=maya, title="older")
    newer = ChatSessionFactory.create(user=maya, title="newer")
    ChatSessionFactory.create(user=other_user, title="theirs")
    ChatLogFactory.create_batch(3, session=older)
    ChatLogFactory.create(session=newer)

    body = token_client.get("/api/chat/sessions/").json()

    assert body["count"] == 2 and body["next"] is None and body["previous"] is None
    assert [s["title"] for s in body["results"]] == ["newer", "older"]
    assert [s["message_count"] for s in body["results"]] == [1, 3]
    assert set(body["results"][0]) == {"id", "title", "created_at", "updated_at", "message_count"}


def test_list_is_paginated(token_client, maya):
    ChatSessionFactory.create_batch(51, user=maya)
    first = token_client.get("/api/chat/sessions/").json()
    assert first["count"] == 51 and len(first["results"]) == 50 and first["next"].endswith("?page=2")
    second = token_client.get(first["next"]).json()
    assert len(second["results"]) == 1


def test_detail_query_count_is_pinned(token_client, maya):
    session = ChatSessionFactory.create(user=maya)
    ChatLogFactory.create_batch(25, session=session)
    with CaptureQueriesContext(connection) as queries:
        response = token_client.get(f"/api/chat/sessions/{session.id}/")
    assert response.status_code == 200 and len(response.json()["messages"]) == 25
    # 1. the token and its user (select_related), 2. the session scoped to the
    # caller, 3. its messages. Independent of the number of messages.
    assert len(queries) == 3, [q["sql"] for q in queries]


def test_messages_are_oldest_first(token_client, maya):
    session = ChatSessionFactory.create(user=maya)
    late = ChatLogFactory.create(session=session, created_at="2026-11-03T00:00:00Z")
    early = ChatLogFactory.create(session=session, created_at="2026-11-01T00:00:00Z")
    body = token_client.get(f"/api/chat/sessions/{session.id}/").json()
    assert [m["id"] for m in body["messages"]] == [str(early.id), str(late.id)]


def test_schema_describes_the_target_union(client, db):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    assert set(schema["paths"]) == {
        "/api/chat/sessions/",
        "/api/chat/sessions/{session_id}/",
        "/api/chat/sessions/{session_id}/turns/",
        "/api/chat/sessions/{session_id}/export/",
        "/api/chat/turns/{turn_id}/events/",
        "/api/chat/turns/{turn_id}/stop/",
    }
    citations = schema["components"]["schemas"]["ChatLog"]["properties"]["citations"]
    union = citations["items"]["properties"]["target"]
    assert union["discriminator"] == {"propertyName": "kind"}
    assert [variant["properties"]["kind"]["enum"] for variant in union["oneOf"]] == [
        [kind]
        for kind in (
            "web",
            "tax_reference",
            "card_document",
            "mortgage_reference",
            "market_data",
            "analysis",
            "account",
            "accounts",
            "portfolio",
        )
    ]
    account = union["oneOf"][6]
    assert account["required"] == ["kind", "accountId", "provider"]


@pytest.mark.parametrize(
    "url",
    [
        "/api/chat/sessions//00000000-0000-4000-8000-000000000000/",
        "/api/chat/sessions/00000000-0000-4000-8000-000000000000//",
        "/api/chat/sessions/%2F/",
        "/api/nothing-here/",
    ],
)
def test_unmatched_api_urls_get_the_same_json_404(token_client, url):
    missing = token_client.get("/api/chat/sessions/00000000-0000-4000-8000-000000000000/")
    response = token_client.get(url)
    assert response.status_code == 404
    assert json.loads(response.content) == json.loads(missing.content) == {"detail": "Not found."}


def test_session_ids_have_one_spelling(token_client, maya):
    session = ChatSessionFactory.create(user=maya)
    assert token_client.get(f"/api/chat/sessions/{str(session.id).upper()}/").status_code == 200
    for spelling in (f"{{{session.id}}}", f"urn:uuid:{session.id}", session.id.hex):
        assert token_client.get(f"/api/chat/sessions/{spelling}/").status_code == 404, spelling


def test_list_query_count_is_pinned(token_client, maya):
    for session in ChatSessionFactory.create_batch(30, user=maya):
        ChatLogFactory.create_batch(2, session=session)
    with CaptureQueriesContext(connection) as queries:
        response = token_client.get("/api/chat/sessions/")
    assert response.status_code == 200 and len(response.json()["results"]) == 30
    assert all(s["message_count"] == 2 for s in response.json()["results"])
    # 1. the token and its user, 2. the paginator's count, 3. the page of
    # sessions with message_count annotated. Independent of the page size.
    assert len(queries) == 3, [q["sql"] for q in queries]


@pytest.mark.parametrize("key", ["a\x00b", "x" * 40, "G" * 40, "0" * 39])
def test_malformed_token_keys_are_401_not_a_database_error(db, key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = client.get("/api/chat/sessions/")
    assert response.status_code == 401
    assert response.json() == {"detail": "Invalid token."}


def test_nul_in_a_query_string_is_400(token_client, admin_client):
    assert token_client.get("/api/chat/sessions/", {"page": "1\x00"}).status_code == 400
    assert admin_client.get("/admin/chat/chatlog/", {"prompt_version__exact": "\x00"}).status_code == 400


def test_message_counts_are_right_on_a_deeper_page(token_client, maya, other_user):
    sessions = ChatSessionFactory.create_batch(53, user=maya)
    for n, session in enumerate(sessions[:3]):  # the 3 oldest: on page 2
        ChatLogFactory.create_batch(n + 1, session=session)
    ChatLogFactory.create_batch(4, session=ChatSessionFactory.create(user=other_user))
    with CaptureQueriesContext(connection) as queries:
        body = token_client.get("/api/chat/sessions/?page=2").json()
    assert len(queries) == 3, [q["sql"] for q in queries]
    assert body["count"] == 53 and body["previous"].endswith("/api/chat/sessions/")
    assert [(s["id"], s["message_count"]) for s in body["results"]] == [
        (str(s.id), 3 - n) for n, s in enumerate(reversed(sessions[:3]))
    ]
