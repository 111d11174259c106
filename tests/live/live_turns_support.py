"""What the tests that run whole live turns through the API share (docs/live.md): maya's API client (a fixture
each module binds as `client`, since a plugin's would replace pytest-django's everywhere), posting a turn,
running one against the recorded model, and `check_events_equal_get`: events == GET == an import."""

from __future__ import annotations

import uuid

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from chat.models import ChatLog
from chat.services import record_turn
from live.models import LiveTurn
from tests.live_support import parse_sse, record_of, script

CARDS = "silvia://your-account/credit-card"


@pytest.fixture
def client(maya):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=maya).key}")
    return api


def post_turn(client, session_id=None, message="How much do I owe on my cards?", **extra):
    session_id = session_id or uuid.uuid4()
    response = client.post(f"/api/chat/sessions/{session_id}/turns/", {"message": message, **extra}, format="json")
    return session_id, response


#: The steps each session's turn ran, for `check_events_equal_get`'s import of the same turn.
SCRIPTED: dict[str, list[dict]] = {}


def run_turn(client, recorded_model, *steps, **extra):
    recorded_model.load([script(*steps)])
    session_id, response = post_turn(client, **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/event-stream")
    body = b"".join(response.streaming_content)
    assert body.startswith(b"retry: 3000\n\n") and body.count(b"retry:") == 1  # docs/live.md#the-wire-format
    SCRIPTED[str(session_id)] = list(steps)
    return session_id, parse_sse(body)


def check_events_equal_get(client, session_id, events):
    """docs/live.md: what the events carried (`rewind` applied) == what GET returns, field for field;
    and an import of the same turn (`record_of`) stores the same row."""
    names = [name for _, name, _ in events]
    assert names[0] == "turn" and names[-3:] == ["citations_summary", "message", "done"]
    ids = [seq for seq, _, _ in events]
    assert ids == sorted(set(ids)) and ids[0] == 1
    body = client.get(f"/api/chat/sessions/{session_id}/").json()
    stored = body["messages"][-1]
    done = events[-1][2]
    assert stored["id"] == done["log_id"] and done["session_id"] == str(session_id)
    assert stored["response"] == "".join(data["text"] for _, name, data in events if name == "text")
    assert stored["inline_citations"] == [data["citation"] for _, name, data in events if name == "citation"]
    assert stored["citations"] == events[-3][2]["citations"]
    assert stored["model"] == events[-2][2]["model"]
    assert done["stop_reason"] == events[-2][2]["stop_reason"] == LiveTurn.objects.get(pk=done["log_id"]).stop_reason
    steps = SCRIPTED.get(str(session_id))
    if steps is not None:  # the one assembler: fed whole blocks (an import), the same row
        live = ChatLog.objects.get(pk=done["log_id"])
        imported = record_turn(record_of(steps, user=live.user, message=live.user_message), user=live.user)
        assert (imported.response, imported.citations, imported.inline_citations, imported.model) == (
            live.response,
            live.citations,
            live.inline_citations,
            live.model,
        )
        imported.delete()
    return stored
