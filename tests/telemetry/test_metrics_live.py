"""Live turns' figures across the Procfile's processes (docs/metrics.md): turns run in the worker through the
recorded model are read from a scrape of the web (one PROMETHEUS_MULTIPROC_DIR); each turn moves the figures
by exactly what its script makes it do, computed from the script."""

from __future__ import annotations

import time
import urllib.request
import uuid

import pytest
from django.db import connection

from tests.telemetry.metrics_support import TOKEN, _samples

# --- live turns in the Procfile's processes ----------------------------------------------------------------------

#: What a live turn records, by sample name (counts of histograms; their sums are times).
TURN_FIGURES = (
    "silvia_turns_finished_total",
    "silvia_turn_duration_seconds_count",
    "silvia_turn_first_text_seconds_count",
    "silvia_model_request_seconds_count",
    "silvia_model_request_retries_total",
    "silvia_model_http_responses_total",
    "silvia_tool_calls_total",
    "silvia_tool_call_seconds_count",
    "silvia_tool_timeouts_total",
)
MAX_RETRIES = 2
OVERLOADED = {"status": 529, "body": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}}


def _scrape_http(base_url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    request = urllib.request.Request(f"{base_url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return _samples(response.read().decode())


def _turn_figures_moved(before: dict, after: dict) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The turn figures that moved between two scrapes, and by how much."""
    keys = {key for key in (*before, *after) if key[0] in TURN_FIGURES}
    moved = {key: after.get(key, 0) - before.get(key, 0) for key in keys}
    return {key: delta for key, delta in moved.items() if delta}


def _expected(
    scripted: dict, *, finished: tuple[str, str], tool_calls: dict[tuple[str, str], int], timeouts: tuple[str, ...] = ()
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A turn's figures computed from its script: one model request and one 200 per step, a first text when a
    step has text; a failing one (`finished` = ("failed", type)) retried to the end on its only step."""
    outcome, error_type = finished
    figures: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {
        ("silvia_turns_finished_total", (("error_type", error_type), ("outcome", outcome))): 1,
        ("silvia_turn_duration_seconds_count", (("outcome", outcome),)): 1,
    }
    if outcome == "done":
        steps = len(scripted["steps"])
        figures[("silvia_model_request_seconds_count", (("outcome", "ok"),))] = steps
        figures[("silvia_model_http_responses_total", (("status", "200"),))] = steps
        if any(block["type"] == "text" for s in scripted["steps"] for block in s["message"]["content"]):
            figures[("silvia_turn_first_text_seconds_count", ())] = 1
    else:
        [only] = scripted["steps"]
        figures[("silvia_model_request_seconds_count", (("outcome", error_type),))] = 1
        figures[("silvia_model_http_responses_total", (("status", str(only["status"])),))] = MAX_RETRIES + 1
        figures[("silvia_model_request_retries_total", ())] = MAX_RETRIES
    for (tool, result), count in tool_calls.items():
        figures[("silvia_tool_calls_total", (("outcome", result), ("tool", tool)))] = count
        figures[("silvia_tool_call_seconds_count", (("tool", tool),))] = (
            figures.get(("silvia_tool_call_seconds_count", (("tool", tool),)), 0) + count
        )
    for tool in timeouts:
        figures[("silvia_tool_timeouts_total", (("tool", tool),))] = 1
    return figures


@pytest.mark.django_db(transaction=True)
def test_a_workers_live_turns_are_in_a_scrape_of_the_web(recorded_model_server, tmp_path):
    """The Procfile's web and worker sharing PROMETHEUS_MULTIPROC_DIR, as deployed (and as `make run` starts
    them): each turn run by the worker moves the web's /metrics by what its recorded script makes it do."""
    from tests.live.test_engine import CHASE, broker_for_this_database, env_for, post, token_for
    from tests.live_support import SSEClient, cite, parse_sse, script, step, text, tool_use
    from tests.procfile import Stack

    answer = script(
        step(tool_use("toolu_1", "read_credit_card_document", {"path": "chase/sapphire-preferred/pricing.md"})),
        step(text("The annual fee is $95.", cite(CHASE, "- Annual fee: $95", "Sapphire Preferred pricing and terms"))),
        match=["answer"],
    )
    overloaded = script(OVERLOADED, match=["overloaded"])
    slow = script(
        step(tool_use("toolu_2", "execute_sql", {"query": "slow"})), step(text("No figures.")), match=["slow"]
    )
    recorded_model_server.load([answer, overloaded, slow])
    tool_round = step(tool_use("toolu_3", "read_credit_card_document", {"path": "chase/sapphire-preferred/pricing.md"}))
    slowly = text("An answer streamed slowly, so that its worker is killed in the middle of it. " * 6)
    resumed = script(tool_round, {**step(slowly), "delay_ms": 100}, match=["resumed"])
    shared = tmp_path / "metrics"
    shared.mkdir()
    env = env_for(
        recorded_model_server,
        broker_for_this_database(tmp_path),
        PROMETHEUS_MULTIPROC_DIR=str(shared),
        METRICS_TOKEN=TOKEN,
        ANTHROPIC_MAX_RETRIES=str(MAX_RETRIES),
        LIVE_TOOL_FACTORIES="tests.live_support.recorded_sql_tool",  # its "slow" query sleeps 5 s
        LIVE_TOOL_TIMEOUT_SECONDS="0.5",
    )
    stack = Stack(env, tmp_path)
    try:
        web, worker = stack.stream(), stack.worker()
        token = token_for("metrics-user")

        def moved_by(before: dict, expected: dict, what: str) -> None:
            # The worker counts a turn right after its last event is in the log, which the client may read first.
            deadline = time.monotonic() + 30
            while (moved := _turn_figures_moved(before, _scrape_http(web.base_url))) != expected:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert moved == expected, what

        def turn(message: str, expected: dict) -> list:
            before = _scrape_http(web.base_url)
            conn, response = post(web.base_url, token, {"message": message})
            assert response.status == 200
            events = parse_sse(response.read())
            conn.close()
            moved_by(before, expected, message)
            return events

        events = turn(
            "metrics answer",
            _expected(answer, finished=("done", ""), tool_calls={("read_credit_card_document", "ok"): 1}),
        )
        assert events[-1][1] == "done"
        events = turn(
            "metrics overloaded", _expected(overloaded, finished=("failed", "overloaded_error"), tool_calls={})
        )
        assert events[-1][2]["error"]["type"] == "overloaded_error"
        # The turn stops waiting for execute_sql at 0.5 s; the tool's own call ends (refused) after its 5 s.
        events = turn(
            "metrics slow",
            _expected(
                slow, finished=("done", ""), tool_calls={("execute_sql", "tool_error"): 1}, timeouts=("execute_sql",)
            ),
        )
        assert events[-1][1] == "done"

        pid = worker.process.pid  # `exec`: the Celery worker itself, which runs every turn (the threads pool)
        if connection.vendor == "postgresql":  # the worker sampled its database pool around its turns
            assert (shared / f"gauge_livesum_{pid}.db").exists()
        totals = _scrape_http(web.base_url)
        worker.terminate()
        assert worker.process.wait(60) == 0
        # Gone, it counts no live gauge any more; its counters stay in the sums.
        assert not (shared / f"gauge_livesum_{pid}.db").exists()
        after = _scrape_http(web.base_url)
        assert {key: after.get(key) for key in totals if key[0] in TURN_FIGURES} == {
            key: value for key, value in totals.items() if key[0] in TURN_FIGURES
        }

        # A worker killed mid-answer: another resumes the turn from its checkpoint (after the tool round).
        recorded_model_server.load([resumed])
        worker = stack.worker()
        before = _scrape_http(web.base_url)
        path = f"/api/chat/sessions/{uuid.uuid4()}/turns/"
        client = SSEClient(web.base_url, "POST", path, token, {"message": "metrics resumed"})
        while not any(name == "text" for _, name, _ in client.events(limit=1)):
            pass
        read_ok = {
            ("silvia_tool_calls_total", (("outcome", "ok"), ("tool", "read_credit_card_document"))): 1,
            ("silvia_tool_call_seconds_count", (("tool", "read_credit_card_document"),)): 1,
        }
        before_kill = {
            ("silvia_turn_first_text_seconds_count", ()): 1,
            ("silvia_model_request_seconds_count", (("outcome", "ok"),)): 1,  # step 1; step 2 is streaming
            ("silvia_model_http_responses_total", (("status", "200"),)): 2,
            **read_ok,
        }
        moved_by(before, before_kill, "the first text, before the kill")
        worker.kill()
        stack.worker()
        assert client.events()[-1][1] == "done"
        client.close()
        # Step 1 and its tool ran once; step 2 was asked twice (the killed worker's request never ended);
        # the first text counts once: the resumed turn's log already held text.
        moved_by(
            before,
            {
                **_expected(resumed, finished=("done", ""), tool_calls={("read_credit_card_document", "ok"): 1}),
                ("silvia_model_http_responses_total", (("status", "200"),)): len(resumed["steps"]) + 1,
            },
            "the resumed turn",
        )
    finally:
        stack.close()
