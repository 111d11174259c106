"""The pieces of live turns' traces (docs/metrics.md#traces), span by span in this process: token usage, stop
reasons and exceptions by type, refused admissions, the messaging system, every helper a no-op when off,
and which OTEL_* settings turn traces on or are refused."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from opentelemetry.trace import StatusCode

from telemetry import genai, tracing
from tests.telemetry.tracing_support import TASK, attrs, exported_text

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
        ("sqlite:////srv/silvia/var/broker/broker.sqlite3", "sqlite"),
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
