"""The session detail's newer points (docs/api.md): ETag and 304, `?after=`, a body streamed in chunks."""

from __future__ import annotations

import datetime as dt
import http.client
import json
import threading
import time

import pytest
import uvicorn
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework import serializers
from rest_framework.authtoken.models import Token

from chat.api import views
from chat.api.rendering import MESSAGE_COLUMNS, SESSION_COLUMNS, session_detail_json
from chat.api.serializers import ChatLogSerializer, ChatSessionDetailSerializer
from tests.factories import ChatLogFactory, ChatSessionFactory, UserFactory

pytestmark = pytest.mark.django_db


def _session_with(maya, n):
    session = ChatSessionFactory.create(user=maya)
    logs = ChatLogFactory.create_batch(n, session=session)
    return session, logs


def _selects(queries):
    return [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith(("SELECT", "DECLARE"))]


def test_etag_answers_304_with_no_body_until_the_session_gains_a_turn(token_client, maya):
    session, _ = _session_with(maya, 3)
    url = f"/api/chat/sessions/{session.id}/"
    first = token_client.get(url)
    etag = first["ETag"]
    assert first.status_code == 200 and etag.startswith('"') and etag.endswith('"')
    assert first["Cache-Control"] == "private, no-cache"

    with CaptureQueriesContext(connection) as queries:
        again = token_client.get(url, HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304 and again.content == b"" and again["ETag"] == etag
    assert len(queries) == 2, [q["sql"] for q in queries]  # the token, the session with its counts
    assert token_client.get(url, HTTP_IF_NONE_MATCH=f'"other", W/{etag}').status_code == 304
    assert token_client.get(url, HTTP_IF_NONE_MATCH="*").status_code == 304

    ChatLogFactory.create(
        session=session, created_at=dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    )  # an older turn, imported late
    changed = token_client.get(url, HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200 and changed["ETag"] != etag
    assert len(changed.json()["messages"]) == 4


def test_etag_differs_per_after_and_per_session(token_client, maya):
    session, logs = _session_with(maya, 2)
    other, _ = _session_with(maya, 2)
    tags = {
        token_client.get(f"/api/chat/sessions/{session.id}/")["ETag"],
        token_client.get(f"/api/chat/sessions/{session.id}/?after={logs[0].id}")["ETag"],
        token_client.get(f"/api/chat/sessions/{other.id}/")["ETag"],
    }
    assert len(tags) == 3


def test_after_returns_only_the_later_messages_in_the_same_shape(token_client, maya):
    session, logs = _session_with(maya, 4)
    whole = token_client.get(f"/api/chat/sessions/{session.id}/").json()

    with CaptureQueriesContext(connection) as queries:
        response = token_client.get(f"/api/chat/sessions/{session.id}/?after={logs[1].id}")
    body = response.json()

    assert response.status_code == 200
    assert len(queries) == 3, [q["sql"] for q in queries]
    assert {k: v for k, v in body.items() if k != "messages"} == {k: v for k, v in whole.items() if k != "messages"}
    assert body["messages"] == whole["messages"][2:]
    last = token_client.get(f"/api/chat/sessions/{session.id}/?after={logs[3].id}").json()
    assert last["messages"] == []


def test_after_breaks_ties_on_created_at_by_id(token_client, maya):
    session = ChatSessionFactory.create(user=maya)
    same = dt.datetime(2026, 11, 5, tzinfo=dt.UTC)
    logs = sorted(ChatLogFactory.create_batch(3, session=session, created_at=same), key=lambda log: log.id.hex)
    body = token_client.get(f"/api/chat/sessions/{session.id}/?after={logs[0].id}").json()
    assert [m["id"] for m in body["messages"]] == [str(logs[1].id), str(logs[2].id)]


def test_after_that_is_not_a_message_of_the_session_is_400_naming_it(token_client, maya, other_user):
    session, _ = _session_with(maya, 1)
    elsewhere = ChatLogFactory.create(session__user=maya)
    theirs = ChatLogFactory.create(session__user=other_user)
    url = f"/api/chat/sessions/{session.id}/"
    for after in ("not-a-uuid", str(elsewhere.id), str(theirs.id), "00000000-0000-4000-8000-000000000000"):
        response = token_client.get(url, {"after": after})
        assert response.status_code == 400, after
        assert list(response.json()) == ["after"]
    # A missing session stays the same 404, whatever `after` says.
    missing = token_client.get("/api/chat/sessions/00000000-0000-4000-8000-000000000000/", {"after": str(elsewhere.id)})
    assert missing.status_code == 404 and missing.json() == {"detail": "Not found."}


def test_a_session_over_one_chunk_is_streamed_with_the_same_bytes(token_client, maya, monkeypatch):
    monkeypatch.setattr(views, "CHUNK_ROWS", 2)
    session, logs = _session_with(maya, 7)

    with CaptureQueriesContext(connection) as queries:
        response = token_client.get(f"/api/chat/sessions/{session.id}/")
        body = b"".join(response.streaming_content)  # the test client closes it at the end

    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "application/json" and response["ETag"]
    assert body == session_detail_json(session=session).body
    assert [m["id"] for m in json.loads(body)["messages"]] == [str(log.id) for log in logs]
    # The token, the session, the messages (a server-side cursor on PostgreSQL): no query per chunk.
    assert len(_selects(queries.captured_queries)) == 3, _selects(queries.captured_queries)

    after = token_client.get(f"/api/chat/sessions/{session.id}/?after={logs[4].id}")
    assert after.status_code == 200
    assert [m["id"] for m in json.loads(b"".join(after.streaming_content))["messages"]] == [
        str(logs[5].id),
        str(logs[6].id),
    ]


def test_detail_columns_are_the_serializers_fields():
    """The fast renderer reads an explicit column list: it must name the serializers' fields, in order."""
    message_fields = ChatLogSerializer().fields
    assert [name for name, _ in MESSAGE_COLUMNS] == list(message_fields)
    session_fields = ChatSessionDetailSerializer().fields
    assert [name for name, _ in SESSION_COLUMNS] + ["messages"] == list(session_fields)
    expected = {serializers.JSONField: "json_text", serializers.DateTimeField: "datetime"}
    for columns, fields in ((MESSAGE_COLUMNS, message_fields), (SESSION_COLUMNS, session_fields)):
        for name, kind in columns:
            field = fields[name]
            want = next((k for cls, k in expected.items() if isinstance(field, cls)), "verbatim")
            assert kind == want, name
            if kind == "verbatim":
                assert isinstance(field, (serializers.CharField, serializers.ChoiceField, serializers.UUIDField)), name


class _Uvicorn:
    """The production ASGI app served by uvicorn in a thread of the test process."""

    def __init__(self) -> None:
        from silvia.asgi import application

        self.server = uvicorn.Server(
            # log_config=None: Django's LOGGING (with the privacy filter) stays
            # in charge of this process's loggers, as it is in production.
            uvicorn.Config(application, host="127.0.0.1", port=0, log_config=None, lifespan="off")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> int:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        return self.server.servers[0].sockets[0].getsockname()[1]

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.mark.django_db(transaction=True)
def test_uvicorn_streams_a_big_session_in_chunks_with_the_same_bytes(monkeypatch):
    monkeypatch.setattr(views, "CHUNK_ROWS", 3)
    owner = UserFactory.create(username="streamer")
    key = Token.objects.create(user=owner).key
    session = ChatSessionFactory.create(user=owner)
    ChatLogFactory.create_batch(10, session=session)
    expected = session_detail_json(session=session).body

    with _Uvicorn() as port:
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        client.request(
            "GET", f"/api/chat/sessions/{session.id}/", headers={"Authorization": f"Token {key}", "Host": "127.0.0.1"}
        )
        response = client.getresponse()
        body = response.read()
        etag = response.getheader("ETag") or ""
        client.request(
            "GET",
            f"/api/chat/sessions/{session.id}/",
            headers={"Authorization": f"Token {key}", "Host": "127.0.0.1", "If-None-Match": etag},
        )
        cached = client.getresponse()
        cached_body = cached.read()
        client.close()

    assert response.status == 200
    assert response.getheader("Transfer-Encoding") == "chunked"  # written as it is read, no Content-Length
    assert body == expected
    assert cached.status == 304 and cached_body == b""
