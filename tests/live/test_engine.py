"""The job engine end to end (issue 18): processes started from the Procfile's lines, over real HTTP.

- a turn posted while no worker runs waits (`turn`, then keep-alives) and
  finishes once a worker starts; admission (the user's limit, the throttle,
  the queue's depth) answers 429/503 JSON with `Retry-After`;
- 40 concurrent turns of 20 users on 2 web processes and 2 workers, one
  worker SIGKILLed mid-way: every turn ends `done`, stored once, equal to
  what its client read; no 5xx, `/healthz` 200 throughout, no `PoolTimeout`;
- SIGTERM during a turn: the worker finishes it, then exits;
- no model configured: 503 JSON, and one warning from each process at start.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import uuid
from typing import Any

import pytest
from django.db import connection
from rest_framework.authtoken.models import Token

from chat.models import ChatLog
from live.models import LiveTurn, LiveTurnStatus
from tests.factories import UserFactory
from tests.live.live_durable_support import needs_rabbitmq, wait_for
from tests.live_support import SSEClient, cite, database_url, parse_sse, script, step, text, tool_use
from tests.procfile import Stack, embedded_env, rabbitmq_env

pytestmark = pytest.mark.django_db(transaction=True)

CHASE = "silvia://credit-card-corpus/chase/sapphire-preferred/pricing.md"


def answer_script(delay_ms: float) -> dict:
    """One tool round (so a checkpoint exists), then a cited answer streamed at `delay_ms` an event."""
    return script(
        step(tool_use("toolu_1", "read_credit_card_document", {"path": "chase/sapphire-preferred/pricing.md"})),
        {
            **step(
                text(
                    "The annual fee is $95.", cite(CHASE, "- Annual fee: $95", "Sapphire Preferred pricing and terms")
                ),
                text(" Purchases cost 20.24% to 27.24% a year, and cash advances cost more."),
            ),
            "delay_ms": delay_ms,
        },
    )


def env_for(recorded_model_server, broker: dict[str, str], **extra: str) -> dict[str, str]:
    return {
        "DATABASE_URL": database_url(),
        "ANTHROPIC_BASE_URL": recorded_model_server.base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "LIVE_TURN_POLL_SECONDS": "0.05",
        **broker,
        **extra,
    }


def broker_for_this_database(tmp_path) -> dict[str, str]:
    """RabbitMQ on PostgreSQL (production's pair), the embedded broker on SQLite (`make run`'s)."""
    if connection.vendor == "postgresql":
        needs_rabbitmq()
        return rabbitmq_env()
    return embedded_env(tmp_path / "broker")


def post(base_url: str, token: str, body: Any, session_id: uuid.UUID | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", int(base_url.rsplit(":", 1)[1]), timeout=60)
    conn.request(
        "POST",
        f"/api/chat/sessions/{session_id or uuid.uuid4()}/turns/",
        body=json.dumps(body),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    return conn, conn.getresponse()


def read_until_keepalive(response, timeout: float = 30.0) -> list[bytes]:
    """Lines of an SSE response up to and including its first keep-alive comment."""
    lines, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = response.readline()
        assert line, "the stream ended"
        lines.append(line)
        if line.startswith(b":"):
            return lines
    raise AssertionError("no keep-alive")


def rest_of_stream(response) -> list[tuple[int, str, Any]]:
    return parse_sse(response.read())


def token_for(username: str) -> str:
    return Token.objects.create(user=UserFactory.create(username=username)).key


def session_row(base_url: str, token: str, session_id: str) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", int(base_url.rsplit(":", 1)[1]), timeout=60)
    conn.request("GET", f"/api/chat/sessions/{session_id}/", headers={"Authorization": f"Token {token}"})
    response = conn.getresponse()
    assert response.status == 200
    body = json.loads(response.read())
    conn.close()
    return body["messages"][-1]


def read_equals_stored(events, row) -> None:
    """docs/live.md: what the events carried == the stored row, field for field."""
    assert row["id"] == events[-1][2]["log_id"]
    assert row["response"] == "".join(data["text"] for _, name, data in events if name == "text")
    assert row["inline_citations"] == [data["citation"] for _, name, data in events if name == "citation"]
    assert row["citations"] == next(data["citations"] for _, name, data in events if name == "citations_summary")


def test_a_queued_turn_waits_admission_refuses_then_a_worker_finishes_them(recorded_model_server, tmp_path):
    recorded_model_server.load([answer_script(delay_ms=0)])
    stack = Stack(
        env_for(
            recorded_model_server,
            broker_for_this_database(tmp_path),
            LIVE_TURN_MAX_PER_USER="2",
            LIVE_TURN_MAX_QUEUED="4",
            LIVE_TURN_THROTTLE_RATE="4/minute",
            LIVE_TURN_RETRY_AFTER_SECONDS="7",
            LIVE_TURN_KEEPALIVE_SECONDS="0.5",
        ),
        tmp_path,
    )
    try:
        web = stack.stream()  # and no worker
        ana, bo, cy = token_for("ana"), token_for("bo"), token_for("cy")
        conn, first = post(web.base_url, ana, {"message": "fee?"})
        assert first.status == 200
        waiting = read_until_keepalive(first)
        head = parse_sse(b"".join(waiting))
        assert [name for _, name, _ in head] == ["turn"] and waiting[-1] == b": keep-alive\n"
        turn_id = head[0][2]["turn_id"]
        assert LiveTurn.objects.get(pk=turn_id).status == LiveTurnStatus.QUEUED

        held = [post(web.base_url, ana, {"message": "fee?"})]  # ana's second: her limit is 2
        _, over_limit = post(web.base_url, ana, {"message": "fee?"})
        assert over_limit.status == 429 and over_limit.getheader("Retry-After") == "7"
        assert json.loads(over_limit.read()) == {
            "detail": "You already have 2 answers in progress. Wait for one to finish."
        }
        held += [post(web.base_url, bo, {"message": "fee?"}) for _ in range(2)]  # 4 queued: the queue's depth
        _, full = post(web.base_url, cy, {"message": "fee?"})
        assert full.status == 503 and full.getheader("Retry-After") == "7"
        assert json.loads(full.read()) == {
            "detail": "Too many questions are waiting for an answer. Please try again shortly."
        }
        _, refused_again = post(web.base_url, ana, {"message": "fee?"})  # ana's 4th POST this minute: still 429
        assert refused_again.status == 429
        refused_again.read()
        _, throttled = post(web.base_url, ana, {"message": "fee?"})  # her 5th: the throttle (4/minute)
        assert throttled.status == 429 and 0 < int(throttled.getheader("Retry-After")) <= 60
        assert json.loads(throttled.read())["detail"].startswith("Request was throttled.")
        assert [response.status for _, response in held] == [200, 200, 200]
        assert LiveTurn.objects.filter(status=LiveTurnStatus.QUEUED).count() == 4

        stack.worker()
        events = parse_sse(b"".join(waiting)) + rest_of_stream(first)
        conn.close()
        assert events[-1][1] == "done"
        read_equals_stored(events, session_row(web.base_url, ana, events[0][2]["session_id"]))
        for held_conn, response in held:
            assert rest_of_stream(response)[-1][1] == "done"
            held_conn.close()
        assert ChatLog.objects.count() == 4
    finally:
        stack.close()


def test_forty_turns_of_twenty_users_with_a_worker_killed(recorded_model_server, tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL: the production pair, with RabbitMQ redelivering the killed worker's tasks")
    needs_rabbitmq()
    recorded_model_server.load([answer_script(delay_ms=60)])
    stack = Stack(env_for(recorded_model_server, rabbitmq_env()), tmp_path)
    try:
        webs = [stack.stream(), stack.stream()]
        workers = [stack.worker(), stack.worker()]
        tokens = [token_for(f"user{i:02d}") for i in range(20)]
        results: list[dict] = []
        lock = threading.Lock()
        stop_probe = threading.Event()
        health: list[int] = []

        def client(index: int) -> None:
            # A burst past what a process admits at once is refused with 503 and Retry-After (issue 38,
            # docs/live.md#admission): the client comes back after it, as the AI SDK's and ask.js do.
            token, web = tokens[index % 20], webs[index % 2]
            for _ in range(60):
                conn, response = post(web.base_url, token, {"message": f"fee? {index}"})
                if response.status != 503 or response.getheader("Retry-After") is None:
                    break
                retry_after = float(response.getheader("Retry-After"))
                response.read()
                conn.close()
                stop_probe.wait(min(retry_after, 2.0))  # the stop flag is never set while clients run
            status, events = response.status, []
            if status == 200:
                events = parse_sse(response.read())
            conn.close()
            with lock:
                results.append({"status": status, "events": events, "token": token, "web": web})

        def probe() -> None:
            while not stop_probe.is_set():
                for web in webs:
                    conn = http.client.HTTPConnection("127.0.0.1", web.port, timeout=30)
                    conn.request("GET", "/healthz")
                    health.append(conn.getresponse().status)
                    conn.close()
                stop_probe.wait(0.2)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(40)]
        prober = threading.Thread(target=probe)
        prober.start()
        for thread in threads:
            thread.start()
        # Mid-way: once some turns are stored and the worker to be killed runs some (its log says a task was
        # received and did not yet succeed: Celery's INFO lines, per task).
        wait_for(lambda: ChatLog.objects.count() >= 6, timeout=120, what="the first stored turns")
        wait_for(
            lambda: workers[0].output().count("] received") > workers[0].output().count("] succeeded"),
            timeout=120,
            what="a turn running on the worker to be killed",
        )
        running_before_kill = LiveTurn.objects.filter(status=LiveTurnStatus.RUNNING).count()
        workers[0].kill()
        for thread in threads:
            thread.join(300)
        stop_probe.set()
        prober.join(30)

        assert not any(thread.is_alive() for thread in threads)
        assert [r["status"] for r in results] == [200] * 40
        assert all(r["events"][-1][1] == "done" for r in results), [r["events"][-1] for r in results]
        log_ids = [r["events"][-1][2]["log_id"] for r in results]
        assert len(set(log_ids)) == 40 and ChatLog.objects.count() == 40  # each stored once
        for r in results:
            read_equals_stored(r["events"], session_row(r["web"].base_url, r["token"], r["events"][0][2]["session_id"]))
        assert running_before_kill > 0 and sum(LiveTurn.objects.values_list("resume_count", flat=True)) >= 1
        assert health and set(health) == {200}
        assert "PoolTimeout" not in stack.logs()
    finally:
        stack.close()


def test_sigterm_during_a_turn_the_worker_finishes_it_then_exits(recorded_model_server, tmp_path):
    recorded_model_server.load([answer_script(delay_ms=100)])
    stack = Stack(env_for(recorded_model_server, broker_for_this_database(tmp_path)), tmp_path)
    try:
        web, worker = stack.stream(), stack.worker()
        token = token_for("dee")
        client = SSEClient(web.base_url, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "?"})
        turn_id = client.events(limit=1)[0][2]["turn_id"]
        wait_for(lambda: LiveTurn.objects.get(pk=turn_id).status == LiveTurnStatus.RUNNING, what="a worker")
        worker.terminate()  # a deploy: warm shutdown
        assert worker.process.wait(30) == 0  # within the documented grace period (docs/deploying.md)
        assert client.events()[-1][1] == "done"
        client.close()
        assert LiveTurn.objects.get(pk=turn_id).status == LiveTurnStatus.DONE
        assert LiveTurn.objects.get(pk=turn_id).resume_count == 0
    finally:
        stack.close()


def test_no_model_configured_is_503_and_each_process_warns_once(tmp_path):
    stack = Stack(
        {"DATABASE_URL": database_url(), "ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": "", **embedded_env(tmp_path)},
        tmp_path,
    )
    try:
        web, worker = stack.stream(), stack.worker()
        _, response = post(web.base_url, token_for("eve"), {"message": "hi"})
        assert response.status == 503 and response.getheader("Content-Type") == "application/json"
        assert json.loads(response.read()) == {"detail": "Live answers are not configured on this server."}
        assert LiveTurn.objects.count() == 0
        for process in (web, worker):
            assert process.output().count("live answers are not configured on this server") == 1, process.output()
        assert "No hostname was supplied" not in worker.output()  # the embedded broker's URL names its host
    finally:
        stack.close()
