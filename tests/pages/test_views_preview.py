"""A turn's article alone and the answer preview through Django's test client (docs/pages.md): a turn alone is
the same article as on its page; the preview renders what has streamed so far, answers a bad body 400
naming what is wrong, and needs a signed-in user and a POST."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from tests.factories import ChatLogFactory

pytestmark = pytest.mark.django_db


def test_a_turn_alone_is_the_same_article_as_on_its_page(maya_client, maya, other_user):
    log = ChatLogFactory.create(session__user=maya, user_message="What is my portfolio worth?")
    page = maya_client.get(f"/chat/{log.session_id}/").content.decode()
    response = maya_client.get(f"/chat/{log.session_id}/turns/{log.id}/")
    assert response.status_code == 200
    article = response.content.decode().strip()
    assert article.startswith(f'<article class="turn" id="turn-{log.id}"') and article.endswith("</article>")
    assert article in page
    assert f'id="chip-{log.id}-1"' in article  # popover ids are the turn's own, wherever it is rendered
    theirs = ChatLogFactory.create(session__user=other_user)
    for path in (
        f"/chat/{theirs.session_id}/turns/{theirs.id}/",
        f"/chat/{log.session_id}/turns/{theirs.id}/",
        f"/chat/{log.session_id}/turns/not-a-uuid/",
        f"/chat/{log.session_id}/turns/{uuid.uuid4()}/",
    ):
        assert maya_client.get(path).status_code == 404, path
    assert Client().get(f"/chat/{log.session_id}/turns/{log.id}/").status_code == 302


def test_the_answer_preview_renders_what_has_streamed_so_far(maya_client, maya):
    body = {
        "answer": "You owe **$2,930.35** on **two ca",
        "inline_citations": [  # "$2,930.35", after "You owe **"
            {"source": "s", "title": "Cards", "start": 10, "end": 19, "target": {"kind": "portfolio"}},
        ],
    }
    response = maya_client.post("/chat/answer-preview/", body, content_type="application/json")
    assert response.status_code == 200 and response["Content-Type"] == "text/html; charset=utf-8"
    html = response.content.decode()
    # The open bold is closed; the chip sits in the first bold, with an id of the live answer's own.
    assert html.startswith(
        '<div class="answer"><p>You owe <strong><mark class="cited">$2,930.35</mark><span class="chip chip--portfolio"'
    )
    assert "<strong>two ca</strong></p>\n</div>" in html and 'id="chip-live-1"' in html


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ("not json", "body: not JSON"),
        ("[]", "body: expected an object"),
        ('{"answer": 5}', "answer: expected a string"),
        ('{"answer": "a", "inline_citations": {}}', "inline_citations: expected a list"),
        (json.dumps({"answer": "a" * 262_145}), "answer: longer than 262144 characters"),
        (json.dumps({"answer": "a", "inline_citations": [{}] * 10_001}), "inline_citations: more than 10000"),
        ("[" * 100_000 + "]" * 100_000, "body: nested too deep"),
        ('{"answer": "a \\ud800 b"}', "body: a string holds a lone surrogate (U+D800)"),
        ('{"answer": "a", "inline_citations": [{"title": "\\udfff"}]}', "body: a string holds a lone surrogate"),
    ],
    ids=[
        *("not json", "not an object", "answer not a string", "citations not a list", "too long", "too many"),
        *("nested too deep", "lone surrogate in the answer", "lone surrogate in a citation"),
    ],
)
def test_a_bad_preview_body_is_a_400_naming_what_is_wrong(maya_client, body, detail):
    response = maya_client.post("/chat/answer-preview/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"].startswith(detail)


def test_the_answer_preview_needs_a_signed_in_user_and_a_post(client, maya_client):
    response = client.post("/chat/answer-preview/", {"answer": "x"}, content_type="application/json")
    assert response.status_code == 302 and response.url.startswith("/login/")
    assert maya_client.get("/chat/answer-preview/").status_code == 405
