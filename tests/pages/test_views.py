"""The conversation page's delete action (issue 39; docs/pages.md#deleting-a-conversation): a confirmation page,
a POST with its CSRF token, the caller's own conversation only."""

from __future__ import annotations

import uuid

from django.test import Client

from chat.models import ChatLog, ChatSession
from tests.factories import ChatLogFactory, ChatSessionFactory


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
