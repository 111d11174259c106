"""Stopping a live turn (SPEC 16, docs/live.md#stopping-a-turn): `POST /api/chat/turns/<id>/stop` at every stage of a
turn, queued, streaming, while the model is quiet and inside a tool call, through the real endpoint, the real SDK
against the recorded model and the production task on Celery's test worker. Each stop: the stream ends with
`error` `stopped`, nothing is stored, the session takes a new turn at once, and the worker lets go promptly (its
log line says how long after the stop)."""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from chat.models import ChatLog, ChatSession
from live.engine import turn_acquire
from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus
from live.stops import STOPPED, STOPPED_MESSAGE, turn_lost, watching
from tests.live.live_turns_support import client, post_turn  # noqa: F401 (the fixture)
from tests.live_support import parse_frames, step, text, tool_use

LONG = "You owe $1,500 across your two cards. " * 40
LET_GO = re.compile(r"turn (\S+) stopped by its user: its worker let go (\d+) ms after the stop")


class Stream:
    """An SSE response of the test client, read one frame at a time."""

    def __init__(self, response) -> None:
        self.chunks = iter(response.streaming_content)
        self.events: list[tuple[int, str, Any]] = []

    def until(self, predicate, timeout: float = 30.0) -> tuple[int, str, Any]:
        deadline = time.monotonic() + timeout
        for event in self.events:
            if predicate(event):
                return event
        for chunk in self.chunks:
            new = parse_frames(chunk)
            self.events += new
            for event in new:
                if predicate(event):
                    return event
            assert time.monotonic() < deadline, f"not seen in {timeout} s: {self.events[-3:]}"
        raise AssertionError(f"the stream ended without it: {self.events[-3:]}")

    def rest(self) -> list[tuple[int, str, Any]]:
        for chunk in self.chunks:
            self.events += parse_frames(chunk)
        return self.events


def wait_for(condition, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.02)
    return value


def stop(api: APIClient, turn_id: str):
    return api.post(f"/api/chat/turns/{turn_id}/stop")


def let_go_ms(caplog, turn_id: str) -> int:
    """The worker's own line: how long after the stop it let go (live.stops)."""

    def found():
        return [int(m[2]) for r in caplog.records if (m := LET_GO.search(r.getMessage())) and m[1] == turn_id]

    return wait_for(found, what="the worker's let-go line")[0]


def assert_stopped(api: APIClient, events, turn_id: str, session_id) -> None:
    """The stream ended with the stop's `error`; nothing stored; the turn failed without its checkpoint."""
    assert events[-1][1] == "error" and events[-1][2] == {"error": {"type": STOPPED, "message": STOPPED_MESSAGE}}
    assert [name for _, name, _ in events].count("error") == 1
    turn = LiveTurn.objects.get(pk=turn_id)
    assert (turn.status, turn.checkpoint, turn.error) == (
        LiveTurnStatus.FAILED,
        None,
        {"type": STOPPED, "message": STOPPED_MESSAGE},
    )
    assert not ChatLog.objects.filter(pk=turn_id).exists()
    assert not ChatLog.objects.filter(session_id=session_id).exists()
    # The row is never written later either: a worker's writes are fenced.
    assert api.get(f"/api/chat/sessions/{session_id}/").status_code == 404


def test_stop_a_queued_turn(maya, client, settings):  # noqa: F811
    """A queued turn (its task not sent: no commit in this test's transaction) stops at once; its task, when a
    worker takes it, does nothing; the session takes a new turn."""
    settings.ANTHROPIC_API_KEY = "test-key"
    session_id, response = post_turn(client)
    stream = Stream(response)
    _, _, data = stream.until(lambda e: e[1] == "turn")
    turn_id = data["turn_id"]
    answer = stop(client, turn_id)
    assert answer.status_code == 200, answer.content
    assert answer.json() == {"turn_id": turn_id, "session_id": str(session_id), "status": "stopped"}
    events = stream.rest()
    assert [name for _, name, _ in events] == ["turn", "error"]
    assert_stopped(client, events, turn_id, session_id)
    turn = LiveTurn.objects.get(pk=turn_id)
    assert turn_acquire(turn.id, turn.task_id) is None  # its task runs nothing
    assert stop(client, turn_id).status_code == 409
    assert post_turn(client, session_id=session_id)[1].status_code == 200  # the session is free at once


def test_stop_is_the_owners_only(maya, other_user, client, settings):  # noqa: F811
    settings.ANTHROPIC_API_KEY = "test-key"
    _, response = post_turn(client)
    turn_id = Stream(response).until(lambda e: e[1] == "turn")[2]["turn_id"]
    sam = APIClient()
    sam.force_authenticate(other_user)
    for bad in (turn_id, str(uuid.uuid4()), "not-a-uuid"):
        refused = stop(sam, bad)
        assert refused.status_code == 404 and refused.json() == {"detail": "Not found."}, bad
    assert APIClient().post(f"/api/chat/turns/{turn_id}/stop").status_code == 401
    assert LiveTurn.objects.get(pk=turn_id).status == LiveTurnStatus.QUEUED
    assert client.get(f"/api/chat/turns/{turn_id}/stop").status_code == 405


def test_stop_while_the_answer_streams(client, recorded_model, caplog):  # noqa: F811
    """Stopped after the first text: no more text comes, the stream ends with `stopped`, nothing is stored."""
    caplog.set_level(logging.INFO, logger="live")
    recorded_model.load([{"name": "slow", "delay_ms": 40, "steps": [step(text(LONG))]}])
    session_id, response = post_turn(client)
    stream = Stream(response)
    turn_id = stream.until(lambda e: e[1] == "turn")[2]["turn_id"]
    stream.until(lambda e: e[1] == "text")
    assert stop(client, turn_id).status_code == 200
    events = stream.rest()
    assert_stopped(client, events, turn_id, session_id)
    streamed = "".join(data["text"] for _, name, data in events if name == "text")
    assert streamed and len(streamed) < len(LONG)
    # Nothing is written after the stop's event; the worker let go within its next batch or watch.
    assert LiveTurnEvent.objects.filter(turn_id=turn_id).order_by("-seq").values_list("event", flat=True)[0] == "error"
    assert let_go_ms(caplog, turn_id) < 2000
    assert post_turn(client, session_id=session_id, message="again")[1].status_code == 200


def test_stop_while_the_model_is_quiet(client, recorded_model, caplog, settings):  # noqa: F811
    """The model sends nothing for 4 s (it waits that long before each event): the watcher shuts the request
    down, so the worker lets go long before the model would have spoken."""
    caplog.set_level(logging.INFO, logger="live")
    settings.ANTHROPIC_TIMEOUT_SECONDS = 30
    recorded_model.load([{"name": "quiet", "delay_ms": 4000, "steps": [step(text("Let me look."))]}])
    session_id, response = post_turn(client)
    stream = Stream(response)
    turn_id = stream.until(lambda e: e[1] == "turn")[2]["turn_id"]
    wait_for(lambda: LiveTurn.objects.filter(pk=turn_id, status=LiveTurnStatus.RUNNING).exists(), what="running")
    time.sleep(0.3)  # the request is out; the model is silent for 4 s (what this test is about)
    stopped_at = time.monotonic()
    assert stop(client, turn_id).status_code == 200
    events = stream.rest()
    assert time.monotonic() - stopped_at < 3
    assert_stopped(client, events, turn_id, session_id)
    assert let_go_ms(caplog, turn_id) < 2500


def test_stop_inside_a_tool_call(client, recorded_model, caplog):  # noqa: F811
    """Stopped while its tool runs (a 5 s query): the worker stops waiting for the tool at once, never asks the
    model again, and nothing is stored."""
    caplog.set_level(logging.INFO, logger="live")
    recorded_model.load(
        [{"name": "tool", "steps": [step(tool_use("toolu_1", "execute_sql", {"query": "slow"})), step(text("x"))]}]
    )
    session_id, response = post_turn(client)
    stream = Stream(response)
    turn_id = stream.until(lambda e: e[1] == "turn")[2]["turn_id"]
    wait_for(lambda: LiveTurnEvent.objects.filter(turn_id=turn_id, event="tool_call").exists(), what="tool call")
    assert stop(client, turn_id).status_code == 200
    events = stream.rest()
    assert_stopped(client, events, turn_id, session_id)
    assert let_go_ms(caplog, turn_id) < 2500  # the tool alone takes 5 s
    assert not LiveTurnEvent.objects.filter(turn_id=turn_id, event="tool_result").exists()
    assert ChatSession.objects.filter(pk=session_id).count() == 0


def test_stop_a_finished_turn_is_a_409(client, recorded_model):  # noqa: F811
    recorded_model.load([{"name": "one", "steps": [step(text("Done."))]}])
    _, response = post_turn(client)
    events = Stream(response).rest()
    assert events[-1][1] == "done"
    turn_id = events[0][2]["turn_id"]
    refused = stop(client, turn_id)
    assert refused.status_code == 409 and refused.json() == {"detail": "This turn has already ended."}
    assert ChatLog.objects.filter(pk=turn_id).exists()


@pytest.mark.django_db(transaction=True)
def test_a_run_that_kept_its_turn_reads_nothing_at_its_end_one_that_lost_it_says_when_it_let_go(maya, caplog):
    """`watching` reads the turn's row for its let-go line only when the run lost the turn: the watcher saw it,
    or a write was refused (`turn_lost`)."""
    caplog.set_level(logging.INFO, logger="live")
    token = uuid.uuid4()
    turn = LiveTurn.objects.create(
        session_id=uuid.uuid4(),
        user=maya,
        user_message="hi",
        prompt_version="v5",
        status=LiveTurnStatus.RUNNING,
        worker_token=token,
    )
    with CaptureQueriesContext(connection) as queries, watching(turn.id, token):
        pass  # the turn stays this worker's: the watcher (its own thread and connection) never fires
    assert queries.captured_queries == []
    stopped_at = timezone.now()
    LiveTurn.objects.filter(pk=turn.id).update(
        status=LiveTurnStatus.FAILED, error={"type": STOPPED, "message": STOPPED_MESSAGE}, finished_at=stopped_at
    )
    with CaptureQueriesContext(connection) as queries, watching(turn.id, token):
        turn_lost(turn.id)  # its next write was refused
    assert len(queries.captured_queries) == 1
    assert let_go_ms(caplog, str(turn.id)) >= 0
