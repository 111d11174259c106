"""Traces across processes (docs/metrics.md#traces): an entry point started with no endpoint loads nothing of
OpenTelemetry; configured, it exports over OTLP/HTTP (protobuf) to a receiver on 127.0.0.1 with the SDK's own
variables, and refuses what the SDK cannot use in one line; the Procfile's web and worker export one trace
per turn, joined through the broker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.live_support import parse_sse, script, step, text, tool_use
from tests.telemetry.tracing_support import QUESTION, TASK, leaked

ROOT = Path(__file__).resolve().parents[2]


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
    (RabbitMQ on PostgreSQL, the embedded broker on SQLite)."""
    from tests.live.test_engine import CHASE, broker_for_this_database, env_for, post, token_for
    from tests.live_support import cite
    from tests.procfile import Stack

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
    assert _attributes(process)["messaging.system"] == ("rabbitmq" if connection.vendor == "postgresql" else "sqlite")
    assert _attributes(process)["silvia.turn.id"] == events[0][2]["turn_id"]
    chats = sorted((s for _, _, s in received if s.name.startswith("chat ")), key=lambda s: s.start_time_unix_nano)
    assert [_attributes(chat)["gen_ai.response.finish_reasons"] for chat in chats] == [("tool_use",), ("end_turn",)]
    assert {chat.parent_span_id for chat in chats} == {process.span_id}
    everything = "\n".join(str(request) for _, _, request in receiver.requests)
    assert events[0][2]["turn_id"] in everything
    assert leaked(everything, [QUESTION, answer, path, CHASE, "Annual fee", str(events[0][2]["session_id"])]) == []
