"""What the stuck-turn tests share (tests/live/test_stuck*.py; docs/job-engine.md#stuck-turns).

In this process: a POST through Django's test client and its stream read to
its end (`read_stream`), and what Celery reports of the turn tasks
(`Attempts`, through its signals: sent, started, retried, ended). With the
Procfile's processes: a turn posted over HTTP with its client still reading
(`Turn`), a POST answered with JSON (`post`), a turn's clock moved back
(`backdate`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import http.client
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from celery import signals
from django.db import connection
from django.db.models import F
from rest_framework.authtoken.models import Token

from live.models import LiveTurn
from tests.factories import UserFactory
from tests.live_support import SSEClient, database_url, parse_sse, script, step, text
from tests.procfile import rabbitmq_available

TASK = "chat.run_live_turn"
STUCK = {"type": "stuck", "message": "This answer could not be finished. Please try again."}


# --- in this process -------------------------------------------------------------------


def post_turn(client, session_id: uuid.UUID, message: str = "What is my balance?"):
    return client.post(f"/api/chat/sessions/{session_id}/turns/", {"message": message}, format="json")


def read_stream(response, timeout: float = 60.0) -> list[tuple[int, str, Any]]:
    """The events of a streaming response, read to its end in a thread: a turn left waiting fails the test
    after `timeout` instead of holding it (its stream would send keep-alives for ever)."""
    assert response.status_code == 200, response.content
    body: list[bytes] = []

    def read() -> None:
        try:
            body.extend(response.streaming_content)
        finally:
            connection.close()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    assert not reader.is_alive(), f"the stream did not end in {timeout} s: {b''.join(body)[-300:]!r}"
    return parse_sse(b"".join(body))


@contextlib.contextmanager
def celery_signal(signal: Any, receiver: Callable[..., None]) -> Iterator[None]:
    signal.connect(receiver, weak=False)
    try:
        yield
    finally:
        signal.disconnect(receiver)


class Attempts:
    """What Celery reports of the turn tasks: each publish `(task id, retries)` (in the sender's thread,
    before the message reaches the broker), each start of an attempt `(task id, retries)`, each retry, each
    end of an attempt `(task id, state)`."""

    def __init__(self) -> None:
        self.published: list[tuple[str, int]] = []
        self.started: list[tuple[str, int]] = []
        self.retried: list[str] = []
        self.ended: list[tuple[str, str]] = []
        self.on_publish: Callable[[str, str, int], None] | None = None
        self.on_retry: Callable[[], None] | None = None

    def publish(self, sender: Any = None, body: Any = None, headers: Any = None, **kwargs: Any) -> None:
        if sender == TASK:
            self.published.append((headers["id"], headers["retries"]))
            if self.on_publish is not None:
                self.on_publish(body[0][0], headers["id"], headers["retries"])

    def prerun(self, sender: Any = None, task_id: Any = None, task: Any = None, **kwargs: Any) -> None:
        if task is not None and task.name == TASK:
            self.started.append((task_id, task.request.retries))

    def postrun(self, sender: Any = None, task_id: Any = None, task: Any = None, state: Any = None, **kw: Any) -> None:
        if task is not None and task.name == TASK:
            self.ended.append((task_id, state))

    def retry(self, sender: Any = None, request: Any = None, **kwargs: Any) -> None:
        if getattr(sender, "name", None) == TASK:
            self.retried.append(request.id)
            if self.on_retry is not None:
                self.on_retry()


@contextlib.contextmanager
def watched_tasks() -> Iterator[Attempts]:
    """What Celery reports of the turn tasks while in the block."""
    seen = Attempts()
    with (
        celery_signal(signals.before_task_publish, seen.publish),
        celery_signal(signals.task_prerun, seen.prerun),
        celery_signal(signals.task_retry, seen.retry),
        celery_signal(signals.task_postrun, seen.postrun),
    ):
        yield seen


# --- the Procfile's processes ----------------------------------------------------------


def wait_for(condition: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def needs_rabbitmq() -> None:
    if not rabbitmq_available():
        if os.environ.get("CI"):
            pytest.fail("RabbitMQ (127.0.0.1:5672) is needed: a killed worker's task is redelivered by it")
        pytest.skip("RabbitMQ is not reachable on 127.0.0.1:5672")


def env_for(recorded_model_server, broker: dict[str, str], **extra: str) -> dict[str, str]:
    return {
        "DATABASE_URL": database_url(),
        "ANTHROPIC_BASE_URL": recorded_model_server.base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "LIVE_TURN_POLL_SECONDS": "0.05",
        "LIVE_TURN_KEEPALIVE_SECONDS": "1",
        **broker,
        **extra,
    }


def token_for(username: str) -> str:
    return Token.objects.create(user=UserFactory.create(username=username)).key


def slow_answer(words: str = "slow") -> dict:
    """One answer streamed over about five seconds (time to kill its worker, or to deliver a message)."""
    return script(step(text(f"A {words} answer, " * 8)), delay_ms=250)


def quick_answer(answer: str) -> dict:
    return script(step(text(answer)))


class Turn:
    """A turn posted to the stream process, its client still reading."""

    def __init__(self, web, token: str, session_id: uuid.UUID | None = None, message: str = "How much do I owe?"):
        self.session_id = session_id or uuid.uuid4()
        self.client = SSEClient(
            web.base_url, "POST", f"/api/chat/sessions/{self.session_id}/turns/", token, {"message": message}
        )
        assert self.client.status == 200
        self.read = self.client.events(limit=1)
        assert self.read[0][1] == "turn"
        self.id = uuid.UUID(self.read[0][2]["turn_id"])

    def row(self) -> LiveTurn:
        return LiveTurn.objects.get(pk=self.id)

    def rest(self) -> list[tuple[int, str, Any]]:
        """Every event the client reads until the stream ends, after those it read."""
        self.read += self.client.events(timeout=60)
        self.client.close()
        return self.read


def post(web, token: str, session_id: uuid.UUID) -> tuple[int, Any]:
    """A POST whose answer is not a stream: its status and JSON body."""
    conn = http.client.HTTPConnection("127.0.0.1", web.port, timeout=60)
    conn.request(
        "POST",
        f"/api/chat/sessions/{session_id}/turns/",
        body=json.dumps({"message": "And now?"}),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    response = conn.getresponse()
    status, body = response.status, json.loads(response.read())
    conn.close()
    return status, body


def backdate(turn: Turn, field: str, seconds: float) -> None:
    """Move the turn's `created_at` or `progressed_at` back by `seconds`: as if that long had passed."""
    LiveTurn.objects.filter(pk=turn.id).update(**{field: F(field) - dt.timedelta(seconds=seconds)})


def consecutive(events: list[tuple[int, str, Any]]) -> bool:
    return [seq for seq, _, _ in events] == list(range(1, len(events) + 1))
