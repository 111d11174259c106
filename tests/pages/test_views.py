"""`pages.views` through Django's test client: the conversation page's delete action (issue 39;
docs/pages.md#deleting-a-conversation), and the answer preview and the session page under the renderer's bounds
(docs/pages.md#bounds)."""

from __future__ import annotations

import json
import socket
import uuid

import pytest
from django.test import Client

from chat.models import ChatLog, ChatSession
from citations.utf16 import utf16_length
from pages.markdown import ANSWER_MAX_CITATIONS
from pages.views import CLIENT_LEFT, PREVIEW_MAX_CHARS, PREVIEW_MAX_CITATIONS
from tests.factories import ChatLogFactory, ChatSessionFactory

# The conversation page's delete action (issue 39; docs/pages.md#deleting-a-conversation): a confirmation page,


def signed_in(user, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def test_get_asks_to_confirm_and_deletes_nothing(maya):
    session = ChatSessionFactory.create(user=maya, title="Cards <b>")
    ChatLogFactory.create_batch(2, session=session)
    page = signed_in(maya).get(f"/chat/{session.pk}/delete/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "“Cards &lt;b&gt;” and its 2 questions and answers will be deleted for good" in body
    assert f'href="/api/chat/sessions/{session.pk}/export?format=md"' in body
    assert ChatLog.objects.filter(session=session).count() == 2
    shown = signed_in(maya).get(f"/chat/{session.pk}/").content.decode()
    assert f'href="/chat/{session.pk}/delete/"' in shown and "Delete conversation" in shown


def test_post_deletes_and_goes_to_the_list_saying_so(maya):
    session = ChatSessionFactory.create(user=maya, title="Cards")
    ChatLogFactory.create_batch(2, session=session)
    client = signed_in(maya)
    response = client.post(f"/chat/{session.pk}/delete/")
    assert response.status_code == 302 and response["Location"] == "/chat/"
    assert not ChatSession.objects.filter(pk=session.pk).exists() and not ChatLog.objects.exists()
    assert "Deleted “Cards”." in client.get("/chat/").content.decode()


def test_only_the_owner_with_the_csrf_token(maya, other_user):
    session = ChatSessionFactory.create(user=maya)
    ChatLogFactory.create(session=session)
    for path in (f"/chat/{session.pk}/delete/", f"/chat/{uuid.uuid4()}/delete/", "/chat/nope/delete/"):
        assert signed_in(other_user).get(path).status_code == 404
        assert signed_in(other_user).post(path).status_code == 404
    assert signed_in(maya, csrf=True).post(f"/chat/{session.pk}/delete/").status_code == 403
    anonymous = Client().post(f"/chat/{session.pk}/delete/")
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")
    assert ChatLog.objects.filter(session=session).count() == 1


# The answer preview and the session page under the renderer's bounds (pages.views, docs/pages.md#bounds),


def preview(client, answer, inline, **extra):
    body = json.dumps({"answer": answer, "inline_citations": inline})
    return client.post("/chat/answer-preview/", body, content_type="application/json", **extra)


@pytest.mark.django_db
def test_the_attackers_previews_are_answered_within_the_bounds(maya_client):
    table = "|a" * 60_000 + "\n" + "|-" * 60_000  # 240,001 characters: a header row of 60,000 cells
    response = preview(maya_client, table, [])
    assert response.status_code == 200
    assert "<table" not in response.content.decode() and len(response.content) < len(table) + 500  # not 8.8 MB

    answer = ("**bold** _em_ `code` [link](https://e.example) " * 300)[:14_000]
    units = utf16_length(answer)
    inline = [
        {"source": f"https://e.example/{n}", "title": "T", "cited_text": "c", "start": n % units, "end": n % units}
        for n in range(PREVIEW_MAX_CITATIONS)
    ]
    page = preview(maya_client, answer, inline).content.decode()
    assert page.count('class="chip chip--') == ANSWER_MAX_CITATIONS
    assert "9,000 more citations are not shown" in page

    stars = "*a" * (PREVIEW_MAX_CHARS // 2)
    assert preview(maya_client, stars, []).content.decode().strip() == f'<div class="answer"><p>{stars}</p>\n</div>'
    assert preview(maya_client, stars + "*", []).status_code == 400


@pytest.mark.django_db
def test_a_preview_whose_client_left_is_not_rendered(maya_client):
    server, client = socket.socketpair()
    try:
        answer = "**Hello**"
        assert preview(maya_client, answer, [], **{"gunicorn.socket": server}).status_code == 200  # still there
        client.sendall(b"GET / HTTP/1.1\r\n")  # a pipelined request: still there
        assert preview(maya_client, answer, [], **{"gunicorn.socket": server}).status_code == 200
        server.recv(100)
        client.close()  # the client's FIN
        response = preview(maya_client, answer, [], **{"gunicorn.socket": server})
        assert response.status_code == CLIENT_LEFT and response.content == b""
    finally:
        server.close()


@pytest.mark.django_db
def test_a_session_page_whose_client_left_stops_between_answers(maya_client, maya):
    log = ChatLogFactory.create(session__user=maya)
    server, client = socket.socketpair()
    try:
        path = f"/chat/{log.session_id}/"
        assert maya_client.get(path, **{"gunicorn.socket": server}).status_code == 200
        client.close()
        assert maya_client.get(path, **{"gunicorn.socket": server}).status_code == CLIENT_LEFT
    finally:
        server.close()
