"""OpenTelemetry traces of live turns (issue 31 item 3; docs/metrics.md#traces).

In this process: a turn POSTed through the API and run by the embedded
Celery worker (`live_worker`) against the recorded model, its spans
collected by the SDK's in-memory exporter: the exact span tree, one trace
from the web's admission to the worker, the GenAI attributes with the
values the recorded script makes, and no user data in any exported span.
Across processes: the Procfile's web and worker exporting over OTLP/HTTP
(protobuf) to a receiver on 127.0.0.1, and an entry point started with no
endpoint loading nothing of OpenTelemetry.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import connection
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from chat.models import ChatLog, LiveTurn
from finance import demo_data
from telemetry import genai, tracing
from tests.live_support import parse_sse, script, step, text, tool_use

ROOT = Path(__file__).resolve().parent.parent
TASK = "chat.run_live_turn"
QUESTION = "How much do I owe on my cards?"
RECORDED_MODEL = "recorded-model-not-claude"
MESSAGE_ID = re.compile(r"msg_rec_[0-9a-f]{20}")


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Every span this process records during the test, in the SDK's in-memory exporter (the web's, in the
    test's thread, and the embedded worker's, in its threads)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with tracing.using(provider):
        yield exporter
    provider.shutdown()


def finished(exporter: InMemorySpanExporter, name: str, count: int = 1, timeout: float = 30.0) -> list[ReadableSpan]:
    """The spans once `count` of them are named `name` (the worker ends its `process` span after the client
    read `done`)."""
    deadline = time.monotonic() + timeout
    while True:
        spans = list(exporter.get_finished_spans())
        if sum(span.name == name for span in spans) >= count or time.monotonic() > deadline:
            return spans
        time.sleep(0.02)


def by_name(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return sorted((span for span in spans if span.name == name), key=began)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def began(span: ReadableSpan) -> int:
    assert span.start_time is not None
    return span.start_time


def ended(span: ReadableSpan) -> int:
    assert span.end_time is not None
    return span.end_time


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def exported_text(spans: list[ReadableSpan]) -> str:
    """Everything the spans would export: names, attributes, events, links, status, resource and scope."""
    parts = []
    for span in spans:
        parts.append(span.name)
        parts.append(repr(dict(span.attributes or {})))
        parts.extend(f"{event.name} {dict(event.attributes or {})!r}" for event in span.events)
        parts.extend(f"{link.context!r} {dict(link.attributes or {})!r}" for link in span.links)
        parts.append(repr(span.status.description))
        parts.append(repr(dict(span.resource.attributes)))
        parts.append(repr(span.instrumentation_scope))
    return "\n".join(parts)


def demo_user_data() -> list[str]:
    """What the demo holds of maya and sam (finance/demo_data.py): ids, tokens, names of accounts."""
    values = [demo_data.MAYA_CLERK, demo_data.SAM_CLERK]
    for connections in (demo_data.MAYA, demo_data.SAM):
        for _source, _institution, item_id, access_token, accounts in connections:
            values += [item_id, access_token]
            for account in accounts:
                values += [
                    str(value)
                    for key, value in account.items()
                    if key.endswith("_id") or key in ("display_name", "official_name")
                ]
    return values


def leaked(text_: str, secrets: list[str]) -> list[str]:
    return sorted({secret for secret in secrets if secret and secret in text_})


# --- one turn in this process: the span tree -------------------------------------------------------------------


def test_a_live_turn_is_one_trace_from_the_post_through_the_queue_to_the_worker(
    maya, recorded_model, settings, spans, live_worker
):
    from tests.test_live_demo import demo_turn

    client, session_id, body = demo_turn(maya, recorded_model, settings, QUESTION)
    events = parse_sse(body)
    turn_id = events[0][2]["turn_id"]
    assert events[-1][1] == "done"
    exported = finished(spans, f"process {TASK}")

    # One trace, from the web's admission to the worker's last write.
    assert {span.context.trace_id for span in exported} == {exported[0].context.trace_id}
    [start] = by_name(exported, "start_turn")
    [send] = by_name(exported, f"send {TASK}")
    [process] = by_name(exported, f"process {TASK}")
    chats = by_name(exported, f"chat {settings.ANTHROPIC_MODEL}")
    [tool] = by_name(exported, "execute_tool execute_sql")
    [checkpoint] = by_name(exported, "save_checkpoint")
    [save] = by_name(exported, "save_turn")
    writes = by_name(exported, "write_events")
    assert len(exported) == 8 + len(writes)  # the spans named here, and nothing else

    assert (start.kind, parent_of(start)) == (SpanKind.INTERNAL, None)
    assert (send.kind, parent_of(send)) == (SpanKind.PRODUCER, start.context.span_id)
    assert (process.kind, parent_of(process)) == (SpanKind.CONSUMER, send.context.span_id)
    # Under the worker's span, in the order the turn ran them: step 1 (a tool call), the tool, the
    # checkpoint after the tool round, step 2 (the answer), the stored turn.
    under_process = [span for span in exported if parent_of(span) == process.context.span_id]
    assert [span.name for span in sorted(under_process, key=began) if span not in writes] == [
        f"chat {settings.ANTHROPIC_MODEL}",
        "execute_tool execute_sql",
        "save_checkpoint",
        f"chat {settings.ANTHROPIC_MODEL}",
        "save_turn",
    ]
    assert [span.kind for span in chats] == [SpanKind.CLIENT, SpanKind.CLIENT]
    # Batches are written by the turn's thread (under the step streaming, or the turn between steps) or by
    # the flusher thread (under the turn); between them, every event after the web's `turn` and before the
    # three the stored turn writes (citations_summary, message, done).
    assert {parent_of(span) for span in writes} <= {process.context.span_id, *(c.context.span_id for c in chats)}
    last_seq = LiveTurn.objects.get(pk=turn_id).last_seq
    assert sum(attrs(span)["silvia.events.count"] for span in writes) == last_seq - 1 - 3
    assert all(attrs(span)["silvia.events.count"] >= 1 for span in writes)
    assert {span.status.status_code for span in exported} == {StatusCode.UNSET}

    # What each span says.
    messaging = {
        "messaging.system": "memory",  # the embedded test worker's transport (tests/conftest.py)
        "messaging.destination.name": live_worker.conf.task_default_queue,
        "messaging.message.id": attrs(send)["messaging.message.id"],
        "silvia.turn.id": turn_id,
    }
    assert attrs(start) == {"silvia.turn.id": turn_id}
    assert uuid.UUID(attrs(send)["messaging.message.id"])
    assert attrs(send) == {
        **messaging,
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
    }
    wait = attrs(process)["silvia.queue.wait_seconds"]
    # From the send (its time in the task's headers, to the microsecond) to the worker taking the task.
    assert 0 <= wait <= (began(process) - began(send)) / 1e9 + 1e-5
    assert attrs(process) == {
        **messaging,
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "silvia.queue.wait_seconds": wait,
    }
    # examples/recorded/20-card-balances.json: each step's usage is the recorded model's, 100 tokens in and one
    # out per 12-character text delta (devtools/recorded_stream.py): step 1 "I'll look up your credit cards."
    # (31 characters: 3), step 2 "Here is what you owe: " (22: 2), "your two credit cards carry the balances
    # listed on each card" (60: 5) and "." (1).
    request = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.system": "anthropic",
        "gen_ai.request.model": settings.ANTHROPIC_MODEL,
        "gen_ai.request.max_tokens": settings.ANTHROPIC_MAX_TOKENS,
        "gen_ai.response.model": RECORDED_MODEL,
    }
    ids = [attrs(chat)["gen_ai.response.id"] for chat in chats]
    assert all(MESSAGE_ID.fullmatch(value) for value in ids) and ids[0] != ids[1]
    assert ids[1] == next(data for _, name, data in events if name == "message")["id"]
    assert [attrs(chat) for chat in chats] == [
        {
            **request,
            "gen_ai.response.id": ids[0],
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.output_tokens": 3,
            "gen_ai.response.finish_reasons": ("tool_use",),
        },
        {
            **request,
            "gen_ai.response.id": ids[1],
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.output_tokens": 8,
            "gen_ai.response.finish_reasons": ("end_turn",),
        },
    ]
    assert attrs(tool) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "execute_sql",
        "gen_ai.tool.type": "function",
        "silvia.tool.outcome": "ok",
    }
    assert attrs(checkpoint) == {} and attrs(save) == {}
    # Each span sits inside its parent in time: the tool and the writes inside the turn, the turn after the POST.
    assert began(start) <= began(send) < ended(send) <= ended(start) <= began(process)
    assert all(began(process) <= began(span) <= ended(span) <= ended(process) for span in under_process)

    # No user data anywhere in what the spans export; the turn id is there (so the scan reads what it should).
    stored = client.get(f"/api/chat/sessions/{session_id}/").json()["messages"][-1]
    log = ChatLog.objects.get(pk=stored["id"])
    [card_balances] = [s for s in recorded_model.scripts if s["name"] == "card-balances"]
    [sql] = [b["input"]["query"] for b in card_balances["steps"][0]["message"]["content"] if "input" in b]
    secrets = [
        QUESTION,
        log.response,
        json.dumps(log.citations),
        json.dumps(log.inline_citations),
        *(json.dumps(c["target"]) for c in log.inline_citations if "target" in c),
        *(c["cited_text"] for c in log.inline_citations),
        *(c["source"] for c in log.citations),
        sql,
        "current_balance",  # a column of the tool's rows
        str(session_id),
        *demo_user_data(),
    ]
    assert (
        "u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dK" in secrets and log.inline_citations[0]["target"]["kind"] == "accounts"
    )
    text_ = exported_text(exported)
    assert turn_id in text_
    assert leaked(text_, secrets) == []


def test_a_failed_model_request_and_a_refused_tool_say_their_type_only(
    recorded_model, spans, client_for_maya, settings
):
    overloaded = {"status": 529, "body": {"type": "error", "error": {"type": "overloaded_error", "message": "Busy"}}}
    recorded_model.load(
        [
            script(
                step(tool_use("toolu_1", "execute_sql", {"query": "SELECT secret_column FROM nowhere"})),
                overloaded,
            )
        ]
    )
    response = client_for_maya.post(f"/api/chat/sessions/{uuid.uuid4()}/turns/", {"message": QUESTION}, format="json")
    events = parse_sse(b"".join(response.streaming_content))
    assert events[-1][2]["error"]["type"] == "overloaded_error"
    exported = finished(spans, f"process {TASK}")

    [process] = by_name(exported, f"process {TASK}")
    first, second = by_name(exported, f"chat {settings.ANTHROPIC_MODEL}")
    [tool] = by_name(exported, "execute_tool execute_sql")
    # The recorded SQL tool refuses a query it has no rows for (a ToolError, its reason for the model).
    assert (tool.status.status_code, tool.status.description) == (StatusCode.ERROR, None)
    assert (attrs(tool)["error.type"], attrs(tool)["silvia.tool.outcome"]) == ("tool_error", "tool_error")
    # The second step is answered 529 until the SDK's retries (2) run out: the failure's kind, as the error event.
    assert first.status.status_code == StatusCode.UNSET
    assert (second.status.status_code, attrs(second)["error.type"]) == (StatusCode.ERROR, "overloaded_error")
    assert "gen_ai.response.id" not in attrs(second)  # no message came
    assert (process.status.status_code, attrs(process)["error.type"]) == (StatusCode.ERROR, "overloaded_error")
    assert all(not span.events for span in exported)  # no exception recorded, with its message
    text_ = exported_text(exported)
    assert leaked(text_, ["secret_column", "unknown recorded query", "Busy", QUESTION]) == []


def test_a_tool_the_turn_stops_waiting_for_is_an_event_of_the_turn(recorded_model, spans, client_for_maya, settings):
    settings.LIVE_TOOL_TIMEOUT_SECONDS = 0.3
    recorded_model.load([script(step(tool_use("toolu_1", "execute_sql", {"query": "slow"})), step(text("No.")))])
    response = client_for_maya.post(f"/api/chat/sessions/{uuid.uuid4()}/turns/", {"message": QUESTION}, format="json")
    assert parse_sse(b"".join(response.streaming_content))[-1][1] == "done"
    # The recorded tool's "slow" query sleeps 5 s: its span ends then, after the turn's.
    exported = finished(spans, "execute_tool execute_sql", timeout=15)
    [process] = by_name(exported, f"process {TASK}")
    [tool] = by_name(exported, "execute_tool execute_sql")
    assert [(event.name, dict(event.attributes or {})) for event in process.events] == [
        ("tool_timed_out", {"gen_ai.tool.name": "execute_sql"})
    ]
    assert parent_of(tool) == process.context.span_id and ended(tool) > ended(process)
    assert attrs(tool)["silvia.tool.outcome"] == "tool_error"  # "slow" has no rows either


@pytest.fixture
def client_for_maya(maya):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=maya).key}")
    return client


# --- the pieces ------------------------------------------------------------------------------------------------


def test_usage_counts_every_input_token_and_gives_the_caches_apart(spans):
    message = {
        "id": "msg_1",
        "model": "claude-x",
        "stop_reason": "max_tokens",
        "usage": {
            "input_tokens": 10,
            "cache_read_input_tokens": 200,
            "cache_creation_input_tokens": 30,
            "output_tokens": 7,
        },
        "content": [{"type": "text", "text": "never in a span"}],
    }
    with genai.model_request_span(model="claude-x", max_tokens=64, error_type=str) as current:
        genai.model_response(current, message)
    [span] = spans.get_finished_spans()
    assert {key: value for key, value in attrs(span).items() if "usage" in key or "response" in key} == {
        "gen_ai.response.model": "claude-x",
        "gen_ai.response.id": "msg_1",
        "gen_ai.usage.input_tokens": 240,  # 10 + 200 + 30
        "gen_ai.usage.cache_read.input_tokens": 200,
        "gen_ai.usage.cache_creation.input_tokens": 30,
        "gen_ai.usage.output_tokens": 7,
        "gen_ai.response.finish_reasons": ("max_tokens",),
    }


def test_a_message_without_usage_or_with_odd_values_sets_only_what_it_has(spans):
    with genai.model_request_span(model="m", max_tokens=1, error_type=str) as current:
        genai.model_response(current, {"usage": {"input_tokens": True, "output_tokens": "3"}, "stop_reason": None})
    [span] = spans.get_finished_spans()
    assert sorted(attrs(span)) == sorted(
        [
            "gen_ai.operation.name",
            "gen_ai.provider.name",
            "gen_ai.system",
            "gen_ai.request.model",
            "gen_ai.request.max_tokens",
        ]
    )


def test_an_exception_leaving_a_span_sets_its_class_never_its_text(spans):
    with pytest.raises(ValueError), tracing.span("write_events"):
        raise ValueError("SELECT * FROM accounts WHERE id = 'u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dK'")
    [span] = spans.get_finished_spans()
    assert (span.status.status_code, span.status.description, span.events) == (StatusCode.ERROR, None, ())
    assert attrs(span) == {"error.type": "ValueError"}


@pytest.mark.parametrize(
    ("error", "error_type"),
    [
        ("lost", "LostTurnError"),  # another worker took the turn over: this one stopped reading
        ("timeout", "timeout_error"),  # the failure's kind, as the turn's error event says
    ],
)
def test_a_model_request_that_stopped_says_why_by_type(spans, error, error_type):
    import anthropic
    import httpx2

    from live.log import LostTurnError
    from live.model_client import model_request_timed

    # What the stream gave before it stopped: message_start's model, id and usage.
    step = SimpleNamespace(message={"model": "claude-x-1", "id": "msg_2", "usage": {"input_tokens": 5}})

    raised = (
        LostTurnError("turn")
        if error == "lost"
        else anthropic.APITimeoutError(request=httpx2.Request("POST", "http://127.0.0.1:9/v1/messages"))
    )
    with pytest.raises(type(raised)), model_request_timed({"model": "claude-x", "max_tokens": 8}, step):  # type: ignore[arg-type]
        raise raised
    [span] = spans.get_finished_spans()
    assert span.name == "chat claude-x" and span.status.status_code == StatusCode.ERROR
    assert {key: attrs(span)[key] for key in ("error.type", "gen_ai.response.id", "gen_ai.usage.input_tokens")} == {
        "error.type": error_type,
        "gen_ai.response.id": "msg_2",
        "gen_ai.usage.input_tokens": 5,
    }


def test_a_refused_admission_names_its_class_not_its_text(spans):
    class TurnLimitError(Exception):
        pass

    @tracing.traced("start_turn", result_attributes=lambda turn: {"silvia.turn.id": turn})
    def turn_start(user_pk: int) -> str:
        raise TurnLimitError(f"user {user_pk} at 3 turns")

    with pytest.raises(TurnLimitError):
        turn_start(4711)
    [span] = spans.get_finished_spans()
    assert (span.name, attrs(span), span.status.status_code) == (
        "start_turn",
        {"error.type": "TurnLimitError"},
        StatusCode.ERROR,
    )
    assert "4711" not in exported_text([span])


def test_off_every_helper_is_a_no_op(monkeypatch):
    monkeypatch.setattr(tracing, "_tracer", None)  # as in a process whose start found no endpoint
    with tracing.span("x") as current, tracing.task_send(TASK, attributes={}) as headers:
        assert (current, headers) == (None, {})
    assert tracing.current_context() is None
    assert tracing.carried(len) is len


@pytest.mark.parametrize(
    ("url", "system"),
    [
        ("amqp://guest:s3cret@127.0.0.1:5672//", "rabbitmq"),
        ("pyamqp://user:pw@host//", "rabbitmq"),
        ("filesystem://localhost//", "filesystem"),
        ("memory://", "memory"),
    ],
)
def test_the_messaging_system_is_the_brokers_kind_never_its_url(url, system):
    assert tracing.messaging_system(url) == system


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "silvia"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "TRUE"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "false"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, True),
    ],
)
def test_traces_are_on_only_with_an_endpoint(environ, on):
    assert tracing.tracing_configured(environ) is on


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("OTEL_TRACES_EXPORTER", "zipkin", "OTEL_TRACES_EXPORTER=zipkin: this service exports traces with otlp only"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc: this service sends OTLP over HTTP"),
        (
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "http/json",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json: this service sends OTLP over HTTP with protobuf only",
        ),
    ],
)
def test_an_exporter_or_protocol_it_does_not_speak_is_refused_naming_the_variable(variable, value, message):
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured) as refused:
        tracing.tracing_configured({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", variable: value})
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


# --- entry points in their own processes -----------------------------------------------------------------------

PROBE = """
import json, sys
import silvia.{entry}
from telemetry import tracing
with tracing.span("probe", attributes={{"probe.n": 1}}):
    pass
tracing.stop_tracing()
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] == "opentelemetry")))
"""


def _entry_point(entry: str, folder: Path, **environ: str) -> subprocess.CompletedProcess[str]:
    """Import `silvia.<entry>` in a fresh interpreter with the OTEL_* variables of `environ` only, record
    one span (`probe`), stop; prints the OpenTelemetry modules loaded."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("OTEL_") and key not in ("DJANGO_SETTINGS_MODULE", "PROMETHEUS_MULTIPROC_DIR")
    }
    env.update(
        DJANGO_SECRET_KEY="tracing-test-key-never-used-to-serve-7Hq2Lx9Vb4Nm6Pc1Rt8Zw3Ks5Fj0",
        PYTHONPATH=str(ROOT),
        CELERY_BROKER_DIR=str(folder / "broker"),
        **environ,
    )
    return subprocess.run(
        [sys.executable, "-c", PROBE.format(entry=entry)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("entry", ["asgi", "wsgi"])
def test_with_nothing_configured_a_web_entry_point_loads_nothing_of_opentelemetry(entry, tmp_path):
    probe = _entry_point(entry, tmp_path)
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout.splitlines()[-1]) == []


class OTLPReceiver:
    """An OTLP/HTTP receiver on 127.0.0.1: `POST /v1/traces` with a protobuf `ExportTraceServiceRequest`.

    `requests` holds each decoded request with its path and content type.
    """

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, ExportTraceServiceRequest]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                decoded = ExportTraceServiceRequest()
                decoded.ParseFromString(body)
                with receiver.lock:
                    receiver.requests.append((self.path, self.headers.get("content-type", ""), decoded))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="otlp-receiver", daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def spans(self) -> list[tuple[int, dict[str, Any], Any]]:
        """(request index, resource attributes, span) of every span received."""
        out: list[tuple[int, dict[str, Any], Any]] = []
        with self.lock:
            for index, (_, _, request) in enumerate(self.requests):
                for resource_spans in request.resource_spans:
                    resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
                    for scope_spans in resource_spans.scope_spans:
                        out.extend((index, resource, span) for span in scope_spans.spans)
        return out

    def wait_for(self, names: set[str], timeout: float = 30.0) -> list[tuple[int, dict[str, Any], Any]]:
        deadline = time.monotonic() + timeout
        while not names <= {span.name for _, _, span in self.spans()} and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.spans()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(item) for item in value.array_value.values)
    return getattr(value, kind) if kind else None


def _attributes(span: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in span.attributes}


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    server = OTLPReceiver()
    yield server
    server.close()


def test_configured_an_entry_point_exports_over_otlp_http_with_the_sdks_own_variables(receiver, tmp_path):
    probe = _entry_point(
        "wsgi",
        tmp_path,
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
        OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test",
    )
    assert probe.returncode == 0, probe.stderr
    loaded = json.loads(probe.stdout.splitlines()[-1])
    assert "opentelemetry.sdk.trace" in loaded and "opentelemetry.exporter.otlp.proto.http.trace_exporter" in loaded
    [(path, content_type, _)] = receiver.requests  # stop_tracing exported what it held, in one batch
    assert (path, content_type) == ("/v1/traces", "application/x-protobuf")
    [(_, resource, span)] = receiver.spans()
    assert (span.name, _attributes(span)) == ("probe", {"probe.n": 1})
    assert resource["service.name"] == "silvia"  # ours, as OTEL_SERVICE_NAME is unset
    assert resource["deployment.environment"] == "test"


def test_otel_service_name_names_the_service(receiver, tmp_path):
    probe = _entry_point(
        "wsgi",
        tmp_path,
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{receiver.endpoint}/v1/traces",
        OTEL_SERVICE_NAME="silvia-eu",
    )
    assert probe.returncode == 0, probe.stderr
    [(_, resource, _)] = receiver.spans()
    assert resource["service.name"] == "silvia-eu"


@pytest.mark.parametrize(
    ("environ", "last_line"),
    [
        (
            {"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "x"},
            "django.core.exceptions.ImproperlyConfigured: OpenTelemetry traces cannot start from the OTEL_* "
            "variables: ValueError: OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT must be a non-negative integer but got x",
        ),
        (
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "django.core.exceptions.ImproperlyConfigured: OTEL_EXPORTER_OTLP_PROTOCOL=grpc: this service sends "
            "OTLP over HTTP with protobuf only (http/protobuf, to port 4318 of a collector; docs/metrics.md#traces).",
        ),
    ],
)
def test_a_value_the_sdk_cannot_use_refuses_the_start_in_one_line(environ, last_line, tmp_path):
    probe = _entry_point("wsgi", tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", **environ)
    assert probe.returncode == 1
    assert probe.stderr.strip().splitlines()[-1] == last_line


def test_a_sampler_the_sdk_cannot_read_is_its_warning_and_the_default(receiver, tmp_path):
    probe = _entry_point(
        "wsgi", tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_TRACES_SAMPLER="sometimes"
    )
    assert probe.returncode == 0, probe.stderr
    assert "Couldn't recognize sampler sometimes." in probe.stderr
    assert [span.name for _, _, span in receiver.spans()] == ["probe"]  # parent-based, always on: sampled


# --- the Procfile's processes, over OTLP/HTTP --------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_procfiles_web_and_worker_export_one_trace_per_turn(recorded_model_server, receiver, tmp_path):
    """The Procfile's web and worker, each exporting to the receiver: the web's admission and the worker's run
    of the same turn are one trace, joined by the W3C trace context the task carried through the broker
    (RabbitMQ on PostgreSQL, the embedded filesystem broker on SQLite)."""
    from tests.live_support import cite
    from tests.procfile import Stack
    from tests.test_live_engine import CHASE, broker_for_this_database, env_for, post, token_for

    path = "chase/sapphire-preferred/pricing.md"
    answer = "The annual fee is $95."
    recorded_model_server.load(
        [
            script(
                step(tool_use("toolu_1", "read_credit_card_document", {"path": path})),
                step(text(answer, cite(CHASE, "- Annual fee: $95", "Sapphire Preferred pricing and terms"))),
            )
        ]
    )
    broker = broker_for_this_database(tmp_path)
    env = env_for(
        recorded_model_server,
        broker,
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY="100",  # milliseconds: the batches leave at once
    )
    stack = Stack(env, tmp_path)
    try:
        web, worker = stack.stream(), stack.worker()
        conn, response = post(web.base_url, token_for("tracing-user"), {"message": QUESTION})
        assert response.status == 200
        events = parse_sse(response.read())
        conn.close()
        assert events[-1][1] == "done", stack.logs()
        names = {"start_turn", f"send {TASK}", f"process {TASK}", "execute_tool read_credit_card_document", "save_turn"}
        received = receiver.wait_for(names)
        worker.terminate()
        assert worker.process.wait(60) == 0
    finally:
        stack.close()

    assert names <= {span.name for _, _, span in received}, stack.logs()
    spans = {span.name: span for _, _, span in received if span.name != "write_events"}
    assert len({span.trace_id for _, _, span in received}) == 1
    start, send, process = spans["start_turn"], spans[f"send {TASK}"], spans[f"process {TASK}"]
    assert (start.parent_span_id, send.parent_span_id, process.parent_span_id) == (b"", start.span_id, send.span_id)
    # The web's spans and the worker's came in requests of their own: two processes, one trace.
    web_spans = ("start_turn", f"send {TASK}")
    web_requests = {index for index, _, span in received if span.name in web_spans}
    assert web_requests.isdisjoint(index for index, _, span in received if span.name not in web_spans)
    assert {resource["service.name"] for _, resource, _ in received} == {"silvia"}
    assert _attributes(process)["messaging.system"] == (
        "rabbitmq" if connection.vendor == "postgresql" else "filesystem"
    )
    assert _attributes(process)["silvia.turn.id"] == events[0][2]["turn_id"]
    chats = sorted((s for _, _, s in received if s.name.startswith("chat ")), key=lambda s: s.start_time_unix_nano)
    assert [_attributes(chat)["gen_ai.response.finish_reasons"] for chat in chats] == [("tool_use",), ("end_turn",)]
    assert {chat.parent_span_id for chat in chats} == {process.span_id}
    everything = "\n".join(str(request) for _, _, request in receiver.requests)
    assert events[0][2]["turn_id"] in everything
    assert leaked(everything, [QUESTION, answer, path, CHASE, "Annual fee", str(events[0][2]["session_id"])]) == []
