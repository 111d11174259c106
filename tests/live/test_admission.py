"""A burst of turn POSTs is answered at once (issue 38 item 4; docs/live.md#admission): the stream process's gate
(`live.admission.AdmissionGate`) lets `LIVE_TURN_ADMISSIONS_AT_ONCE` POSTs into Django at a time and refuses the
rest, `503` with `Retry-After`, after `LIVE_TURN_ADMISSION_WAIT_SECONDS`, before any takes a pooled connection.

The gate alone, on an ASGI app of the test's (its slots, its refusals, the moment a slot is given back); then the
Procfile's `stream` process on the test database with a tiny pool, a small admission bound, the recorded model
configured and the embedded broker (no worker: the admitted turns stay queued, their streams open), and a burst of
POSTs sent at once over 127.0.0.1 by asyncio sockets, each from its own user.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import Any

import pytest
from django.db import connection

from live.admission import BUSY_DETAIL, AdmissionGate, busy_response_parts, pool_shortfall, warn_if_pool_small
from live.models import LiveTurn
from tests.live.stuck_support import env_for, token_for
from tests.procfile import Stack, embedded_env

# --- the gate alone ----------------------------------------------------------------------------


class _HeldApp:
    """An ASGI app that starts its response only when the test says so: `entered` counts the requests inside."""

    def __init__(self) -> None:
        self.entered = 0
        self.go = asyncio.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.entered += 1
        await self.go.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def _request(gate: AdmissionGate, path: str = "/gated") -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await gate({"type": "http", "method": "POST", "path": path}, receive, send)
    return sent


def _gate(app: Any, at_once: int = 2, wait_seconds: float = 0.2) -> AdmissionGate:
    return AdmissionGate(
        app, at_once=at_once, wait_seconds=wait_seconds, retry_after=5, gated=lambda scope: scope["path"] == "/gated"
    )


def test_past_its_slots_the_gate_refuses_after_its_wait_without_calling_the_app():
    async def scenario() -> None:
        app = _HeldApp()
        gate = _gate(app)
        started = time.monotonic()
        requests = [asyncio.create_task(_request(gate)) for _ in range(5)]
        await asyncio.sleep(0.35)  # past the 0.2 s wait: the three without a slot are answered
        refused = [task for task in requests if task.done()]
        elapsed = time.monotonic() - started
        assert (len(refused), app.entered, gate.refused) == (3, 2, 3)
        assert elapsed < 1.0
        headers, body = busy_response_parts(5)
        for task in refused:
            assert task.result() == [
                {"type": "http.response.start", "status": 503, "headers": headers},
                {"type": "http.response.body", "body": body},
            ]
        app.go.set()
        admitted = await asyncio.gather(*[task for task in requests if not task.done()])
        assert [[m.get("status") for m in sent] for sent in admitted] == [[200, None], [200, None]]

    asyncio.run(scenario())


def test_a_slot_is_given_back_when_its_response_starts_and_ungated_paths_pass():
    async def scenario() -> None:
        streaming = asyncio.Event()
        finish = asyncio.Event()

        async def stream_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            streaming.set()
            await finish.wait()  # a stream that goes on: its slot is already free
            await send({"type": "http.response.body", "body": b""})

        gate = _gate(stream_app, at_once=1, wait_seconds=0.5)
        first = asyncio.create_task(_request(gate))
        await streaming.wait()
        finish_second = asyncio.create_task(_request(gate))  # takes the slot the first gave back
        await asyncio.sleep(0.05)
        finish.set()
        assert [m.get("status") for m in await first] == [200, None]
        assert [m.get("status") for m in await finish_second] == [200, None]
        assert await _request(gate, "/other") != []  # not gated
        assert gate.refused == 0

    asyncio.run(scenario())


def test_a_request_facing_a_wait_longer_than_allowed_is_refused_at_once():
    async def scenario() -> None:
        go = asyncio.Event()
        calls = 0

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            nonlocal calls
            calls += 1
            await (asyncio.sleep(0.2) if calls == 1 else go.wait())  # the first holds its slot 0.2 s
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})

        gate = _gate(app, at_once=1, wait_seconds=0.3)
        await _request(gate)
        assert gate.usual_hold is not None and 0.2 <= gate.usual_hold < 0.3
        holding = asyncio.create_task(_request(gate))  # takes the slot until `go`
        await asyncio.sleep(0.02)
        waits = asyncio.create_task(_request(gate))  # 1 x 0.2 s ahead of it: within 0.3 s, it waits
        await asyncio.sleep(0.02)
        started = time.monotonic()
        refused = await _request(gate)  # 2 x 0.2 s ahead: past 0.3 s, refused without waiting
        assert time.monotonic() - started < 0.1
        assert refused[0]["status"] == 503 and gate.refused == 1 and not waits.done()
        go.set()
        assert [m.get("status") for m in await holding] == [200, None]
        assert [m.get("status") for m in await waits] == [200, None]
        assert (gate.refused, gate.waiting) == (1, 0)

    asyncio.run(scenario())


def test_at_a_give_back_the_waiters_who_cannot_have_a_slot_in_their_time_are_refused_then():
    async def scenario() -> None:
        go = asyncio.Event()
        calls = 0

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            nonlocal calls
            calls += 1
            await (asyncio.sleep(0.2) if calls == 1 else go.wait())  # the first holds its slot 0.2 s
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})

        gate = _gate(app, at_once=1, wait_seconds=0.7)
        requests = [asyncio.create_task(_request(gate)) for _ in range(5)]
        await asyncio.sleep(0.02)
        assert (gate.waiting, gate.usual_hold) == (4, None)  # no hold measured yet: all four wait
        await asyncio.sleep(0.23)
        # At 0.2 s the first gave its slot back (a hold of 0.2 s) to the second; of the three left, about 0.5 s
        # from their deadline, the first waits 0.2 s, the second 0.4 s, the third 0.6 s: it is refused.
        done = [task for task in requests if task.done()]
        assert [sent[0]["status"] for sent in (task.result() for task in done)] == [200, 503]
        assert (gate.waiting, gate.refused) == (2, 1)
        go.set()
        statuses = [sent[0]["status"] for sent in await asyncio.gather(*requests)]
        assert statuses == [200, 200, 200, 200, 503]
        assert (gate.free, gate.waiting) == (1, 0)

    asyncio.run(scenario())


def test_the_refusal_is_json_with_retry_after():
    headers, body = busy_response_parts(7)
    assert json.loads(body) == {"detail": "Too many questions are arriving at once. Please try again shortly."}
    assert json.loads(body)["detail"] == BUSY_DETAIL
    assert dict(headers)[b"retry-after"] == b"7"
    assert dict(headers)[b"content-type"] == b"application/json"
    assert dict(headers)[b"content-length"] == str(len(body)).encode()


# --- a burst over HTTP against the stream process ------------------------------------------------


class _Post:
    """One POST on a raw socket: when its status line came, its status and headers, whether its stream sent its
    first event, and whether the server ended the stream (EOF) before a keep-alive followed that event."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.status = 0
        self.headers: dict[str, str] = {}
        self.answered: float | None = None
        self.body = b""
        self.first_event: str | None = None
        self.ended_early = False
        self.kept_alive = False

    async def run(self, port: int, started: float, follow_seconds: float) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = json.dumps({"message": "How much do I owe?"}).encode()
        writer.write(
            f"POST /api/chat/sessions/{uuid.uuid4()}/turns/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Token {self.token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        try:
            status_line = await reader.readline()
            self.answered = time.monotonic() - started
            self.status = int(status_line.split()[1])
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                self.headers[name.strip().lower()] = value.strip()
            if self.status != 200:
                self.body = await reader.readexactly(int(self.headers["content-length"]))
                return
            deadline = time.monotonic() + follow_seconds
            while time.monotonic() < deadline:
                try:
                    line = await asyncio.wait_for(reader.readline(), deadline - time.monotonic())
                except TimeoutError:
                    return
                if not line:
                    self.ended_early = not self.kept_alive
                    return
                if b"event: " in line and self.first_event is None:
                    self.first_event = line.split(b"event: ", 1)[1].strip().decode()
                if b": keep-alive" in line and self.first_event is not None:
                    self.kept_alive = True
                    return
        finally:
            writer.close()


async def _burst(port: int, tokens: list[str], follow_seconds: float) -> list[_Post]:
    posts = [_Post(token) for token in tokens]
    started = time.monotonic()
    await asyncio.gather(*(post.run(port, started, follow_seconds) for post in posts))
    return posts


@pytest.mark.django_db(transaction=True)
def test_a_burst_of_posts_is_answered_at_once_and_no_admitted_stream_ends_early(recorded_model_server, tmp_path):
    # 80 POSTs at once, one admission at a time, 0.3 s of wait: refusals are certain (80 admissions would
    # need under 4 ms each), and each comes within the wait plus the time to write it.
    n, wait = 80, 0.3
    tokens = [token_for(f"burst{i:03d}") for i in range(n)]
    env = env_for(
        recorded_model_server,
        embedded_env(tmp_path / "broker"),
        LIVE_TURN_ADMISSIONS_AT_ONCE="1",
        LIVE_TURN_ADMISSION_WAIT_SECONDS=str(wait),
        LIVE_SSE_READ_THREADS="2",
        DATABASE_POOL_MIN_SIZE="1",
        DATABASE_POOL_MAX_SIZE="5",  # one admission + two readers + two others: no more (PostgreSQL only)
        DATABASE_POOL_TIMEOUT="3",
        LIVE_TURN_KEEPALIVE_SECONDS="1",
    )
    stack = Stack(env, tmp_path)
    try:
        stream = stack.stream()  # no worker: the admitted turns stay queued, their streams open
        posts = asyncio.run(_burst(stream.port, tokens, follow_seconds=6.0))
        statuses = sorted({post.status for post in posts})
        admitted = [post for post in posts if post.status == 200]
        refused = [post for post in posts if post.status == 503]
        assert statuses == [200, 503], (statuses, stack.logs()[-3000:])
        assert len(admitted) + len(refused) == n
        # Every refusal is the gate's (or the service's: the same words), with Retry-After, and came at once.
        for post in refused:
            assert post.headers["retry-after"] == "5"
            assert json.loads(post.body) == {"detail": BUSY_DETAIL}
        slowest = max(post.answered or 99.0 for post in posts)
        assert slowest < 2.0, slowest  # admitted or refused, every status line within 2 s
        # Every admitted stream sent its turn's first event, then a keep-alive: none ended by the server.
        assert [post.first_event for post in admitted] == ["turn"] * len(admitted), stack.logs()[-3000:]
        assert [post for post in admitted if post.ended_early or not post.kept_alive] == []
        # What the clients were told is what is stored: one queued turn per admitted POST, none per refusal.
        assert LiveTurn.objects.count() == len(admitted)
        logs = stack.logs()
        assert "Traceback" not in logs and "DATABASE_POOL_MAX_SIZE" not in logs  # sized as deploying.md says
    finally:
        stack.close()


def test_the_pool_a_stream_process_needs_is_its_admissions_its_readers_and_two():
    # The defaults: 4 admissions + 4 readers + 2 others = 10, the default pool.
    assert pool_shortfall(pool_max_size=10, admissions_at_once=4, read_threads=4) == 0
    assert pool_shortfall(pool_max_size=8, admissions_at_once=4, read_threads=4) == 2
    assert pool_shortfall(pool_max_size=8, admissions_at_once=4, read_threads=2) == 0  # deploying.md's 8 cores
    assert pool_shortfall(pool_max_size=None, admissions_at_once=4, read_threads=4) == 0  # no pool


def test_a_stream_process_with_too_small_a_pool_says_so_once(settings, caplog):
    settings.LIVE_TURN_ADMISSIONS_AT_ONCE, settings.LIVE_SSE_READ_THREADS = 6, 6
    with caplog.at_level(logging.WARNING, logger="live.admission"):
        warn_if_pool_small()
    pool = connection.settings_dict.get("OPTIONS", {}).get("pool")
    if isinstance(pool, dict):  # PostgreSQL with the pool: 10 by default, 14 wanted
        size = pool["max_size"]
        assert caplog.messages == [
            f"DATABASE_POOL_MAX_SIZE {size} is {14 - size} below LIVE_TURN_ADMISSIONS_AT_ONCE + "
            "LIVE_SSE_READ_THREADS + 2: admissions and stream reads may wait for a connection "
            "(docs/deploying.md#database-connections)"
        ]
    else:  # SQLite: no pool, nothing to size
        assert caplog.messages == []
