"""The answer preview and the session page under the renderer's bounds (pages.views, docs/pages.md#bounds),
through Django's test client: the attacker's previews of issue 36 are answered within the bounds, and a
request whose client left is not rendered (a real socket pair stands for gunicorn's client socket)."""

from __future__ import annotations

import json
import socket

import pytest

from citations.utf16 import utf16_length
from pages.markdown import ANSWER_MAX_CITATIONS
from pages.views import CLIENT_LEFT, PREVIEW_MAX_CHARS, PREVIEW_MAX_CITATIONS
from tests.factories import ChatLogFactory

pytest_plugins = ["tests.pages_fixtures"]

pytestmark = pytest.mark.django_db


def preview(client, answer, inline, **extra):
    body = json.dumps({"answer": answer, "inline_citations": inline})
    return client.post("/chat/answer-preview/", body, content_type="application/json", **extra)


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
