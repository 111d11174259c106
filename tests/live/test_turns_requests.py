"""Live-turn requests the API refuses (docs/live.md): no credentials, another user's session or turn, a bad
body, and a second turn posted to a session while one runs."""

from __future__ import annotations

import json
import threading
import uuid

import pytest
from django.db import connection
from rest_framework.test import APIClient

from live.models import LiveTurn
from tests.live import live_turns_support
from tests.live.live_turns_support import post_turn, run_turn
from tests.live_support import parse_sse, script, step, text

#: maya's API client (tests/live/live_turns_support.py), bound here: it replaces pytest-django's `client`
#: for this module only.
client = live_turns_support.client


pytestmark = pytest.mark.django_db(transaction=True)


# --- requests refused -------------------------------------------------------


def test_no_credentials_is_401(recorded_model):
    response = APIClient().post(f"/api/chat/sessions/{uuid.uuid4()}/turns/", {"message": "hi"}, format="json")
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"


def test_another_users_session_is_404(client, recorded_model, other_user):
    from chat.models import ChatSession

    session = ChatSession.objects.create(user=other_user)
    _, response = post_turn(client, session_id=session.id)
    assert response.status_code == 404 and response.json() == {"detail": "Not found."}
    _, response = post_turn(client, session_id="not-a-uuid")
    assert response.status_code == 404
    assert LiveTurn.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({}, "message", "This field is required."),
        ({"message": ""}, "message", "This field may not be blank."),
        ({"message": "   "}, "message", "This field may not be blank."),
        ({"message": "x" * 20001}, "message", "Ensure this field has no more than 20000 characters."),
        ({"message": "hi", "prompt_version": "v4"}, "prompt_version", '"v4" is not a valid choice.'),
        ({"message": 12}, "message", "Expected a string."),
    ],
)
def test_bad_body_is_400(client, recorded_model, body, field, message):
    response = client.post(f"/api/chat/sessions/{uuid.uuid4()}/turns/", body, format="json")
    assert response.status_code == 400 and response.json() == {field: [message]}
    assert LiveTurn.objects.count() == 0


def test_two_concurrent_posts_to_one_session(client, recorded_model, maya):
    recorded_model.load([script(step(text("A slow answer to make the turn last."), delay_ms=30))])
    session_id = uuid.uuid4()
    statuses: list[int] = []

    def post():
        api = APIClient()
        api.force_authenticate(maya)
        response = api.post(f"/api/chat/sessions/{session_id}/turns/", {"message": "hi"}, format="json")
        statuses.append(response.status_code)
        if response.status_code == 200:
            b"".join(response.streaming_content)  # type: ignore[attr-defined]
        connection.close()  # this thread's own connection

    threads = [threading.Thread(target=post) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(statuses) == [200, 409]
    assert LiveTurn.objects.count() == 1


def test_events_of_another_users_turn_is_404(client, recorded_model, other_user):
    _, events = run_turn(client, recorded_model, step(text("Hi.")))
    turn_id = events[0][2]["turn_id"]
    api = APIClient()
    api.force_authenticate(other_user)
    assert api.get(f"/api/chat/turns/{turn_id}/events").status_code == 404
    assert client.get(f"/api/chat/turns/{uuid.uuid4()}/events").status_code == 404
    assert client.get(f"/api/chat/turns/{turn_id}/events", HTTP_LAST_EVENT_ID="x").status_code == 400
    replay = parse_sse(
        b"".join(client.get(f"/api/chat/turns/{turn_id}/events", HTTP_LAST_EVENT_ID="2").streaming_content)
    )
    assert replay == events[2:]
    assert json.loads(json.dumps(replay)) == json.loads(json.dumps(events[2:]))
