"""Deleting a session and erasing a user's chats (SPEC 16; docs/api.md#deleting-a-session, docs/privacy.md):
`DELETE /api/chat/sessions/<id>/` and `manage.py erase_user_chats`, over `live.erasure`."""

from __future__ import annotations

import io
import threading
import uuid

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from chat.models import ChatLog, ChatSession, UserWriteMark
from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus
from tests.factories import ChatLogFactory, ChatSessionFactory
from tests.live.live_turns_support import client, post_turn  # noqa: F401 (the fixture)
from tests.live.test_stops import Stream, wait_for
from tests.live_support import step, text


def live_turn(session_id, user, status=LiveTurnStatus.DONE, events=3, turn_id=None) -> LiveTurn:
    turn = LiveTurn.objects.create(
        id=turn_id or uuid.uuid4(),
        session_id=session_id,
        user=user,
        user_message="q",
        prompt_version="v5",
        status=status,
        last_seq=events,
    )
    LiveTurnEvent.objects.bulk_create(
        LiveTurnEvent(turn=turn, seq=seq, event="text", data='{"text":"x"}') for seq in range(1, events + 1)
    )
    return turn


def session_with_everything(user, turns=2):
    session = ChatSessionFactory.create(user=user)
    for _ in range(turns):
        log = ChatLogFactory.create(session=session)
        live_turn(session.id, user, events=4, turn_id=log.id)  # a stored live turn: the row's id is the turn's
    return session


def counts(session_id):
    return (
        ChatSession.objects.filter(pk=session_id).count(),
        ChatLog.objects.filter(session_id=session_id).count(),
        LiveTurn.objects.filter(session_id=session_id).count(),
        LiveTurnEvent.objects.filter(turn__session_id=session_id).count(),
    )


def _write_count(user) -> int:
    mark = UserWriteMark.objects.filter(user=user).first()
    return mark.seq if mark is not None else 0


def test_delete_removes_the_session_and_everything_of_it(maya, other_user, token_client):
    mine, kept, theirs = (
        session_with_everything(maya),
        session_with_everything(maya),
        session_with_everything(other_user),
    )
    assert counts(mine.id) == (1, 2, 2, 8)
    writes_before = _write_count(maya)
    response = token_client.delete(f"/api/chat/sessions/{mine.id}/")
    assert response.status_code == 204 and response.content == b""
    assert counts(mine.id) == (0, 0, 0, 0)
    # One write of maya's chat data counted: a read on a replica right after waits for it (chat.replica).
    assert _write_count(maya) == writes_before + 1
    assert counts(kept.id) == counts(theirs.id) == (1, 2, 2, 8)
    assert token_client.get(f"/api/chat/sessions/{mine.id}/").status_code == 404
    assert token_client.delete(f"/api/chat/sessions/{mine.id}").status_code == 404  # gone: a 404 again
    # The list no longer has it; the other session stays.
    assert [s["id"] for s in token_client.get("/api/chat/sessions/").json()["results"]] == [str(kept.id)]


def test_another_users_missing_or_malformed_session_is_the_same_404(maya, other_user, token_client):
    theirs = session_with_everything(other_user)
    for bad in (str(theirs.id), str(uuid.uuid4()), "nope", str(theirs.id).upper().replace("-", "")):
        response = token_client.delete(f"/api/chat/sessions/{bad}/")
        assert response.status_code == 404 and response.json() == {"detail": "Not found."}, bad
    assert counts(theirs.id) == (1, 2, 2, 8)
    assert APIClient().delete(f"/api/chat/sessions/{theirs.id}/").status_code == 401


def test_a_signed_in_delete_needs_its_csrf_token(maya):
    session = session_with_everything(maya)
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(maya)
    refused = browser.delete(f"/api/chat/sessions/{session.id}/")
    assert refused.status_code == 403 and refused.json()["detail"].startswith("CSRF Failed")
    assert counts(session.id) == (1, 2, 2, 8)


def test_a_session_whose_first_turn_is_still_live_can_be_deleted(maya, token_client):
    """No session row yet (it comes with the stored turn): the live turn makes it the caller's."""
    session_id = uuid.uuid4()
    live_turn(session_id, maya, status=LiveTurnStatus.FAILED)
    assert token_client.delete(f"/api/chat/sessions/{session_id}/").status_code == 204
    assert counts(session_id) == (0, 0, 0, 0)


def test_delete_during_a_running_turn_stops_it_first(client, recorded_model, caplog):  # noqa: F811
    """The running turn's stream ends with `stopped`; then nothing of the session is left, and the worker,
    fenced, writes nothing back (no session row, no log) once it lets go."""
    recorded_model.load([{"name": "slow", "delay_ms": 50, "steps": [step(text("A long answer. " * 60))]}])
    first_id, first = post_turn(client, message="first")
    Stream(first).rest()
    session_id = first_id
    _, response = post_turn(client, session_id=session_id, message="second")
    stream = Stream(response)
    turn_id = stream.until(lambda e: e[1] == "turn")[2]["turn_id"]
    stream.until(lambda e: e[1] == "text")
    reader = threading.Thread(target=stream.rest)  # the stream is read meanwhile, as a client reads it
    reader.start()
    assert client.delete(f"/api/chat/sessions/{session_id}/").status_code == 204
    reader.join(30)
    events = stream.events
    assert events[-1] == (events[-1][0], "error", {"error": {"type": "stopped", "message": "You stopped this answer."}})
    wait_for(lambda: not LiveTurn.objects.filter(pk=turn_id).exists(), what="the turn deleted")
    wait_for(lambda: "its worker let go" in caplog.text, what="the worker to let go of the turn")
    assert counts(session_id) == (0, 0, 0, 0)  # fenced: nothing of its last writes landed


def test_erase_user_chats_dry_run_then_erase(maya, other_user):
    mine = [session_with_everything(maya), session_with_everything(maya, turns=1)]
    theirs = session_with_everything(other_user)
    live_turn(uuid.uuid4(), maya, status=LiveTurnStatus.FAILED, events=2)  # a new session's failed first turn
    out = io.StringIO()
    call_command("erase_user_chats", "maya", "--dry-run", stdout=out)
    assert out.getvalue() == "maya: would erase 2 sessions, 3 chat logs, 4 live turns, 14 events\n"
    assert ChatLog.objects.filter(user=maya).count() == 3
    out = io.StringIO()
    call_command("erase_user_chats", "maya", stdout=out)
    assert out.getvalue() == "maya: erased 2 sessions, 3 chat logs, 4 live turns, 14 events\n"
    for session in mine:
        assert counts(session.id) == (0, 0, 0, 0)
    assert not LiveTurn.objects.filter(user=maya).exists()
    assert counts(theirs.id) == (1, 2, 2, 8)
    assert maya.__class__.objects.filter(pk=maya.pk).exists()  # the user stays
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("erase_user_chats", "nobody")
