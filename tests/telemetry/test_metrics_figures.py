"""What moves each Prometheus figure in this process (docs/metrics.md): imports and the backfill, tool calls,
SSE streams, the SDK's retries and the API's responses, turns failed without a run; and what a scrape reads
from the database (turns by state, failures by type, the pool). Counters are compared before and after (the
suite shares one registry)."""

from __future__ import annotations

import asyncio
import json
import os
import uuid

import pytest
from django.core.management import call_command
from django.test import Client
from prometheus_client import REGISTRY

from chat.backfill import backfill_citation_targets
from chat.models import ChatLog
from citations.tools import ToolError
from live.models import LiveTurn
from telemetry import metrics
from tests.factories import ChatLogFactory
from tests.telemetry.metrics_support import EXAMPLES, ROOT, TOKEN, _samples
from tools.measured import MeasuredTool
from tools.registry import configured_tools

OUTCOMES = ("imported", "skipped", "failed")


def _scrape(client: Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    return _samples(response.content.decode())


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


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
    prompt = f"hello {uuid.uuid4()}"  # a request of its own: the attempts count per identical body
    with (
        model_client() as client,
        client.messages.stream(model="m", max_tokens=50, messages=[{"role": "user", "content": prompt}]) as stream,
    ):
        assert stream.get_final_message().content[0].text == "Hello."  # type: ignore[union-attr]
    assert _value("silvia_model_request_retries_total") - before["retries"] == 1
    assert _value("silvia_model_http_responses_total", status="529") - before["529"] == 1
    assert _value("silvia_model_http_responses_total", status="200") - before["200"] == 1


@pytest.mark.django_db(transaction=True)
def test_turns_failed_without_a_run_are_counted_by_their_type(maya, settings):
    """A turn whose workers stopped too often (`interrupted`, at its next delivery) and a queued turn whose
    task the broker refused (`queue_unavailable`, in the web process) end failed without a runner."""
    from live.engine import fail_unstarted, turn_acquire
    from live.models import LiveTurnEvent

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
