"""/metrics: Prometheus, not public, multi-process aware (issue 21, item 5; docs/metrics.md).

The endpoint is read back with prometheus-client's own parser. Counters of
this process are compared before and after (the suite shares one registry);
the multi-process test starts from an empty directory, so its figures are
absolute. Live turns run in the Procfile's worker process, through the
recorded model, and are read from a scrape of the web process: each turn
moves the figures by what its script makes it do, computed from the script.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from chat.backfill import backfill_citation_targets
from chat.models import ChatLog, LiveTurn
from citations.tools import ToolError
from telemetry import metrics
from tests.factories import ChatLogFactory, UserFactory
from tests.uvicorn_server import subprocess_database_url, uvicorn_server
from tools.measured import MeasuredTool
from tools.registry import configured_tools

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "turns"
OUTCOMES = ("imported", "skipped", "failed")
TOKEN = "metrics-test-token-9Qw3Er5Ty7Ui"


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """`{(sample name, sorted labels): value}` of an exposition."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _scrape(client: Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    return _samples(response.content.decode())


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


# --- the endpoint ----------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_metrics_is_not_served_without_a_token_configured(settings):
    settings.METRICS_TOKEN = ""
    assert Client().get("/metrics").status_code == 404
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/metrics", "/readyz", "/healthz"])
def test_the_probes_answer_another_method_405_not_the_csrf_page(settings, path):
    settings.METRICS_TOKEN = TOKEN
    response = Client(enforce_csrf_checks=True).post(path, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer wrong-token", f"Token {TOKEN}", f"Basic {TOKEN}", f"Bearer {TOKEN}x"],
)
def test_metrics_refuses_without_the_token(settings, authorization):
    settings.METRICS_TOKEN = TOKEN
    headers = {} if authorization is None else {"HTTP_AUTHORIZATION": authorization}
    response = Client().get("/metrics", **headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert b"silvia_" not in response.content


@pytest.mark.django_db
def test_metrics_answers_with_the_token(settings):
    settings.METRICS_TOKEN = TOKEN
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    names = {family.name for family in text_string_to_metric_families(response.content.decode())}
    assert {
        "silvia_turns_finished",
        "silvia_turn_first_text_seconds",
        "silvia_model_request_seconds",
        "silvia_tool_calls",
        "silvia_sse_streams_open",
        "silvia_imported_turns",
        "silvia_live_turns",
        "silvia_live_turn_queue_depth",
    } <= names


# --- imports and backfill --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_import_moves_the_import_counter_by_its_records(settings, tmp_path):
    settings.METRICS_TOKEN = TOKEN
    client = Client()
    records = [record for path in sorted(EXAMPLES.glob("*.json")) for record in json.loads(path.read_text())]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"session": {"id": "not-a-uuid"}}\n')
    key, skipped, failed = (("silvia_imported_turns_total", (("outcome", outcome),)) for outcome in OUTCOMES)
    before = _scrape(client)

    call_command("import_turns", str(EXAMPLES), "--create-users", stdout=open(os.devnull, "w"))  # noqa: SIM115
    after_first = _scrape(client)
    assert after_first.get(key, 0) - before.get(key, 0) == len(records) == 15

    call_command("import_turns", str(EXAMPLES), stdout=open(os.devnull, "w"))  # noqa: SIM115
    with pytest.raises(Exception, match="1 record"):
        call_command("import_turns", str(bad), stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w"))  # noqa: SIM115
    after = _scrape(client)
    assert after.get(key, 0) - after_first.get(key, 0) == 0
    assert after.get(skipped, 0) - before.get(skipped, 0) == 15
    assert after.get(failed, 0) - before.get(failed, 0) == 1


@pytest.mark.django_db(transaction=True)
def test_an_old_row_backfilled_moves_the_backfill_counters():
    ChatLogFactory.create(
        citations=[{"source": "silvia://your-portfolio", "title": "Your portfolio", "cited_text": "a"}],
        inline_citations=[
            {"source": "silvia://analysis", "title": "Analysis", "cited_text": "b", "start": 0, "end": 1},
            {"source": "https://example.org/", "title": "Web", "cited_text": "c", "start": 1, "end": 2},
        ],
    )
    before = {
        key: _value(*key[:1], **dict(key[1:]))
        for key in [
            ("silvia_backfill_rows_total", ("result", "scanned")),
            ("silvia_backfill_rows_total", ("result", "changed")),
            ("silvia_backfill_citations_typed_total", ("kind", "portfolio")),
            ("silvia_backfill_citations_typed_total", ("kind", "analysis")),
        ]
    }
    backfill_citation_targets(model=ChatLog, dry_run=True)  # a dry run counts nothing
    report = backfill_citation_targets(model=ChatLog)
    assert report.rows_scanned == ChatLog.objects.count()
    after = {key: _value(*key[:1], **dict(key[1:])) for key in before}
    assert [after[key] - before[key] for key in before] == [report.rows_scanned, 1, 1, 1]


# --- tools, streams, the model -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_tool_calls_are_counted_and_timed_by_name_and_outcome(maya):
    tools = {tool.name: tool for tool in configured_tools()}
    reader = tools["read_tax_authority"]
    assert isinstance(reader, MeasuredTool)
    ok, refused = ("read_tax_authority", "ok"), ("read_tax_authority", "tool_error")
    before = {key: _value("silvia_tool_calls_total", tool=key[0], outcome=key[1]) for key in (ok, refused)}
    timed = _value("silvia_tool_call_seconds_count", tool="read_tax_authority")

    path = next(
        p for p in (ROOT / "examples" / "corpus" / "tax-authority").rglob("*") if p.is_file() and p.suffix != ".json"
    )
    relative = str(path.relative_to(ROOT / "examples" / "corpus" / "tax-authority"))
    assert reader.run({"path": relative}, user=maya)["content"]
    with pytest.raises(ToolError):
        reader.run({"path": "../../settings.py"}, user=maya)

    assert _value("silvia_tool_calls_total", tool="read_tax_authority", outcome="ok") - before[ok] == 1
    assert _value("silvia_tool_calls_total", tool="read_tax_authority", outcome="tool_error") - before[refused] == 1
    assert _value("silvia_tool_call_seconds_count", tool="read_tax_authority") - timed == 2


def test_an_sse_stream_is_counted_open_while_it_is_served():
    def gauge() -> float:
        return _value("silvia_sse_streams_open", view="test")

    start = gauge()
    stream = metrics.count_open_stream(iter([b"a", b"b"]), view="test")
    assert next(stream) == b"a" and gauge() == start + 1
    assert list(stream) == [b"b"] and gauge() == start

    async def chunks():
        yield b"x"
        yield b"y"

    async def read_one_then_close() -> float:
        stream = metrics.count_open_stream(chunks(), view="test")
        assert await stream.__anext__() == b"x"
        during = gauge()
        await stream.aclose()  # the client went away
        return during

    assert asyncio.run(read_one_then_close()) == start + 1
    assert gauge() == start


def test_the_sdks_retries_and_the_apis_responses_are_counted(recorded_model_server, settings):
    """The turns' client (`model_client()`) against the recorded model's 529 then a message."""
    from live.model_client import model_client

    settings.ANTHROPIC_BASE_URL, settings.ANTHROPIC_API_KEY = recorded_model_server.base_url, "test-key"
    settings.ANTHROPIC_MAX_RETRIES = 2
    message = {"content": [{"type": "text", "text": "Hello."}], "stop_reason": "end_turn"}
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    recorded_model_server.load([{"steps": [{"attempts": [{"status": 529, "body": overloaded}, {"message": message}]}]}])
    before = {
        "retries": _value("silvia_model_request_retries_total"),
        "529": _value("silvia_model_http_responses_total", status="529"),
        "200": _value("silvia_model_http_responses_total", status="200"),
    }
    client = model_client()
    prompt = f"hello {uuid.uuid4()}"  # a request of its own: the attempts count per identical body
    with client.messages.stream(model="m", max_tokens=50, messages=[{"role": "user", "content": prompt}]) as stream:
        assert stream.get_final_message().content[0].text == "Hello."  # type: ignore[union-attr]
    assert _value("silvia_model_request_retries_total") - before["retries"] == 1
    assert _value("silvia_model_http_responses_total", status="529") - before["529"] == 1
    assert _value("silvia_model_http_responses_total", status="200") - before["200"] == 1


@pytest.mark.django_db(transaction=True)
def test_turns_failed_without_a_run_are_counted_by_their_type(maya, settings):
    """A turn whose workers stopped too often (`interrupted`, at its next delivery) and a queued turn whose
    task the broker refused (`queue_unavailable`, in the web process) end failed without a runner."""
    from chat.models import LiveTurnEvent
    from live.engine import fail_unstarted, turn_acquire

    def counted(error_type: str) -> float:
        return _value("silvia_turns_finished_total", outcome="failed", error_type=error_type)

    def queued() -> LiveTurn:
        turn = LiveTurn.objects.create(session_id=uuid.uuid4(), user=maya, user_message="hi", prompt_version="v5")
        LiveTurnEvent.objects.create(turn=turn, seq=1, event="turn", data="{}")
        LiveTurn.objects.filter(pk=turn.pk).update(last_seq=1)
        return turn

    settings.LIVE_TURN_MAX_RESUMES = 1
    before = {kind: counted(kind) for kind in ("interrupted", "queue_unavailable")}
    interrupted = queued()
    assert None not in (turn_acquire(interrupted.id), turn_acquire(interrupted.id))  # a start, a takeover
    assert turn_acquire(interrupted.id) is None and turn_acquire(interrupted.id) is None  # failed, then a no-op
    refused = queued()
    fail_unstarted(refused.id, "queue_unavailable", "The service could not queue this question.")
    fail_unstarted(refused.id, "queue_unavailable", "The service could not queue this question.")  # not queued now
    assert {kind: counted(kind) - before[kind] for kind in before} == {"interrupted": 1, "queue_unavailable": 1}
    assert {(row.error or {}).get("type") for row in LiveTurn.objects.filter(status="failed")} == set(before)


# --- read from the database at scrape time ----------------------------------------------------------------------


@pytest.mark.django_db
def test_turns_by_state_and_failures_by_type_come_from_the_database(settings, maya):
    settings.METRICS_TOKEN = TOKEN

    def turn(status: str, error_type: str | None = None) -> None:
        error = {"type": error_type, "message": "x"} if error_type else None
        LiveTurn.objects.create(
            session_id=uuid.uuid4(), user=maya, user_message="q", prompt_version="v5", status=status, error=error
        )

    for status, error_type in [
        ("running", None),
        ("done", None),
        ("done", None),
        ("failed", "overloaded_error"),
        ("failed", "overloaded_error"),
        ("failed", "timeout_error"),
    ]:
        turn(status, error_type)
    samples = _scrape(Client())
    assert {state: samples[("silvia_live_turns", (("state", state),))] for state in ("running", "done", "failed")} == {
        "running": 1,
        "done": 2,
        "failed": 3,
    }
    assert samples[("silvia_live_turns_failed", (("error_type", "overloaded_error"),))] == 2
    assert samples[("silvia_live_turns_failed", (("error_type", "timeout_error"),))] == 1
    assert samples[("silvia_live_turn_queue_depth", ())] == 0


@pytest.mark.django_db
def test_the_database_pool_is_sampled(settings):
    from django.db import connection

    if getattr(connection, "pool", None) is None:
        pytest.skip("no connection pool (SQLite, or DATABASE_POOL=false)")
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    stats = connection.pool.get_stats()  # type: ignore[attr-defined]  # Django 5.2's pool: not in the stubs yet
    metrics.sample_pool(every_seconds=0)
    in_use = _value("silvia_db_pool_connections", alias="default", state="in_use")
    idle = _value("silvia_db_pool_connections", alias="default", state="idle")
    assert in_use + idle == stats["pool_size"]
    assert idle == stats.get("pool_available", 0)


# --- several processes ------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_scrape_adds_up_every_process_of_the_host(tmp_path):
    """An import in its own process, a scrape of a uvicorn process: multiprocess mode, one shared directory."""
    UserFactory.create(username="maya")
    UserFactory.create(username="sam")
    shared = tmp_path / "metrics"
    shared.mkdir()
    env = {
        "DATABASE_URL": subprocess_database_url(tmp_path),
        "PROMETHEUS_MULTIPROC_DIR": str(shared),
        "METRICS_TOKEN": TOKEN,
    }
    imported = subprocess.run(
        [sys.executable, "manage.py", "import_turns", str(EXAMPLES / "01-card-balances.json")],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "silvia.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert imported.returncode == 0, imported.stderr
    expected = len(json.loads((EXAMPLES / "01-card-balances.json").read_text()))
    with uvicorn_server(tmp_path / "server.log", env, ["--workers", "2"]) as server:
        request = urllib.request.Request(f"{server.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            samples = _samples(response.read().decode())
        refused = urllib.request.Request(f"{server.url}/metrics")
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(refused, timeout=30)
        assert answer.value.code == 401
    assert samples[("silvia_imported_turns_total", (("outcome", "imported"),))] == expected == 3
    assert samples[("silvia_live_turns", (("state", "running"),))] == 0


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
    from tests.live_support import SSEClient, cite, parse_sse, script, step, text, tool_use
    from tests.procfile import Stack
    from tests.test_live_engine import CHASE, broker_for_this_database, env_for, post, token_for

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
