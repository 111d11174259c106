"""A user's open event streams are capped per process (docs/live.md#admission): one user reconnecting
thousands of times cannot make every other user's requests wait on the pool and the poll threads."""

from __future__ import annotations

import uuid

import pytest
from django.core.signals import request_finished
from django.db import close_old_connections
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from live.models import LiveTurn

pytestmark = pytest.mark.django_db


def _client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def _events(client: APIClient, turn: LiveTurn):
    return client.get(f"/api/chat/turns/{turn.id}/events/")


def _close(response) -> None:
    # As the test client closes a response: `request_finished` without closing the test database.
    request_finished.disconnect(close_old_connections)
    try:
        response.close()
    finally:
        request_finished.connect(close_old_connections)


def test_past_the_cap_a_reconnect_is_a_429_until_a_stream_closes(maya, other_user, settings):
    settings.LIVE_SSE_MAX_STREAMS_PER_USER = 2
    turn = LiveTurn.objects.create(session_id=uuid.uuid4(), user=maya, user_message="hi", prompt_version="v5")
    theirs = LiveTurn.objects.create(session_id=uuid.uuid4(), user=other_user, user_message="hi", prompt_version="v5")
    client = _client(maya)
    first, second = _events(client, turn), _events(client, turn)
    assert (first.status_code, second.status_code) == (200, 200)  # open: not read, not closed
    refused = _events(client, turn)
    assert (refused.status_code, refused["Retry-After"]) == (429, "5")
    assert refused.json() == {"detail": "You have 2 answer streams open. Close one and try again."}
    assert _events(_client(other_user), theirs).status_code == 200  # the cap is each user's
    _close(first)
    again = _events(client, turn)
    assert again.status_code == 200
    for response in (second, again):
        _close(response)
    last = [_events(client, turn) for _ in range(2)]
    assert [response.status_code for response in last] == [200, 200]
    for response in last:
        _close(response)
