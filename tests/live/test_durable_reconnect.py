"""Durable turns (issues 10 and 18): a client that goes away and reconnects, after every event and to a second
web process, reads what an uninterrupted client reads, nothing lost, nothing repeated.

Real processes started from the Procfile: web (uvicorn) and worker (Celery) on the test database and the
embedded broker, the real SDK against the recorded model over HTTP, a real HTTP client reading SSE."""

from __future__ import annotations

import uuid

import pytest

from citations.live_events import LOG_ONLY_EVENTS
from live.models import LiveTurnEvent
from tests.live.live_durable_support import durable_script, normalized, stored, uninterrupted
from tests.live_support import SSEClient

pytestmark = pytest.mark.django_db(transaction=True)


def logged_ids(events) -> bool:
    """The client's ids are exactly its turn's log's ids but those of the log-only events (which our stream
    never sends: docs/live.md#log-only-events), in order: nothing lost, nothing repeated."""
    turn_id = events[0][2]["turn_id"]
    logged = LiveTurnEvent.objects.filter(turn_id=turn_id).exclude(event__in=LOG_ONLY_EVENTS).order_by("seq")
    return [seq for seq, _, _ in events] == list(logged.values_list("seq", flat=True))


def test_disconnect_after_n_events_and_reconnect(embedded, token, recorded_model_server):
    recorded_model_server.load([durable_script(delay_ms=2)])
    web = embedded.stream()
    embedded.worker()
    reference = uninterrupted(web, token)
    total = len(reference)
    for n in range(1, total):
        post = SSEClient(
            web.base_url, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "cards?"}
        )
        first = post.events(limit=n)
        post.close()  # the client goes away; the turn goes on
        turn_id = first[0][2]["turn_id"]
        again = SSEClient(
            web.base_url,
            "GET",
            f"/api/chat/turns/{turn_id}/events",
            token,
            headers={"Last-Event-ID": str(first[-1][0])},
        )
        rest = again.events()
        again.close()
        seen = first + rest
        assert normalized(seen) == normalized(reference), n
        assert logged_ids(seen), n
        assert stored(seen[-1][2]["log_id"]) == stored(reference[-1][2]["log_id"])
        # ?after= works the same as the header, and a finished turn replays and closes.
        replay = SSEClient(web.base_url, "GET", f"/api/chat/turns/{turn_id}/events?after=0", token)
        assert replay.events() == seen
        replay.close()


def test_reconnect_served_by_a_second_web_process(embedded, token, recorded_model_server):
    recorded_model_server.load([durable_script(delay_ms=40)])
    first_web, second_web = embedded.stream(), embedded.stream()
    embedded.worker()
    post = SSEClient(first_web.base_url, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "?"})
    first = post.events(limit=4)
    post.close()
    follow = SSEClient(
        second_web.base_url,
        "GET",
        f"/api/chat/turns/{first[0][2]['turn_id']}/events",
        token,
        headers={"Last-Event-ID": str(first[-1][0])},
    )
    rest = follow.events()
    follow.close()
    assert rest[-1][1] == "done"
    assert logged_ids(first + rest)
    recorded_model_server.load([durable_script()])
    assert normalized(first + rest) == normalized(uninterrupted(first_web, token))
