"""OpenTelemetry traces of live turns (docs/metrics.md#traces): off unless an OTLP endpoint is configured.

One trace per turn, across the web and the worker: `start_turn` (the web's
admission, `live.service.turn_start`) and its `send chat.run_live_turn`
(the Celery task, which carries the W3C trace context in its headers), then
the worker's `process chat.run_live_turn` with, under it, each model request
(`chat {model}`, the GenAI semantic conventions), each tool call
(`execute_tool {name}`) and the event log's writes (`write_events`,
`save_checkpoint`, `save_turn`).

What a span may carry is closed: names, the turn id (a UUID of ours), the
task's id and queue, models, token counts, stop reasons, event counts,
seconds, outcomes and error *types* (a failure's kind or an exception's
class, never its text: an exception's text can quote SQL or rows). Never a
question, an answer, a tool's input or output, an account id, a target or a
citation (docs/privacy.md). No exception is recorded (`record_exception`
writes its message).

Configured by the SDK's own variables (docs/configuration.md#operations):
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` turns
it on (OTLP over HTTP with protobuf), `OTEL_SDK_DISABLED=true` or
`OTEL_TRACES_EXPORTER=none` keeps it off; the service name, resource,
sampler, batching and the exporter's headers, timeout and TLS are the SDK's
`OTEL_*` variables too. Off, this module imports nothing of OpenTelemetry and
each function below costs one check.

The provider is this module's, not the API's global one, which a process can
set only once: `start_tracing` makes it from the environment, once per
process; `using(provider)` lends one for a block (the tests' in-memory exporter).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "add_event",
    "carried",
    "current_context",
    "messaging_system",
    "span",
    "start_tracing",
    "stop_tracing",
    "task_process",
    "task_send",
    "traced",
    "tracing_configured",
    "turn_failed",
    "using",
]

P = ParamSpec("P")
R = TypeVar("R")

#: `service.name` when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES` names one.
SERVICE_NAME = "silvia"
#: The instrumentation scope of every span.
SCOPE = "silvia"
#: The task header with the time the web sent it (epoch seconds), for the worker's queue wait.
SENT_AT_HEADER = "silvia_sent_at"
#: The one exporter and protocol this service has: OTLP over HTTP with protobuf.
_EXPORTERS = ("", "otlp")
_PROTOCOLS = ("", "http/protobuf")

_lock = threading.Lock()
_tracer: Tracer | None = None  # None: traces are off in this process
_provider: TracerProvider | None = None  # the one `start_tracing` made, shut down by `stop_tracing`
_started_in: int | None = None  # the pid `start_tracing` ran in


def tracing_configured(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether `environ` turns traces on: an OTLP endpoint, the SDK not disabled, the exporter not `none`.

    Raises `ImproperlyConfigured`, one line naming the variable, for an
    exporter or protocol other than OTLP over HTTP with protobuf (set with an
    endpoint, the operator expects traces that would never arrive).
    """
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
    if not endpoint.strip() or environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    if exporter not in _EXPORTERS:
        raise ImproperlyConfigured(
            f"OTEL_TRACES_EXPORTER={exporter}: this service exports traces with otlp only "
            "(or none, to keep them off; docs/metrics.md#traces)."
        )
    for variable in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = environ.get(variable, "").strip().lower()
        if protocol not in _PROTOCOLS:
            raise ImproperlyConfigured(
                f"{variable}={protocol}: this service sends OTLP over HTTP with protobuf only "
                "(http/protobuf, to port 4318 of a collector; docs/metrics.md#traces)."
            )
    return True


def start_tracing() -> bool:
    """Turn this process's traces on when the environment says so, once per process; whether they are on.

    Called where a web or worker process starts (`silvia/celery.py`, which
    both load; a forked pool's child again). The SDK reads its `OTEL_*`
    variables itself; one it cannot use makes it log a warning, or refuse,
    and then this raises `ImproperlyConfigured` with the SDK's own words
    (`OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT must be a non-negative integer but got x`).
    """
    global _tracer, _provider, _started_in
    with _lock:
        if _started_in == os.getpid():
            return _provider is not None
        _started_in = os.getpid()
        _provider = None  # a forked child exports through its own provider, not its parent's threads
        if not tracing_configured():
            return False
        try:
            provider = _provider_from_environment()
        except Exception as error:
            raise ImproperlyConfigured(
                f"OpenTelemetry traces cannot start from the OTEL_* variables: {type(error).__name__}: {error}"
            ) from None
        _provider, _tracer = provider, provider.get_tracer(SCOPE)
        return True


def _provider_from_environment() -> TracerProvider:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
    provider = TracerProvider(resource=resource)  # the sampler: OTEL_TRACES_SAMPLER(_ARG); parent-based by default
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # OTEL_BSP_*, OTEL_EXPORTER_OTLP_*
    return provider


def stop_tracing() -> None:
    """Export the spans still held and stop (a worker's shutdown); spans after it are not recorded."""
    global _tracer, _provider
    with _lock:
        provider, _provider = _provider, None
        if provider is None:
            return
        _tracer = None
    provider.shutdown()


@contextlib.contextmanager
def using(provider: TracerProvider) -> Iterator[None]:
    """Record this process's spans with `provider` during the block (a test's), then as before."""
    global _tracer
    before = _tracer
    _tracer = provider.get_tracer(SCOPE)
    try:
        yield
    finally:
        _tracer = before


# --- spans -------------------------------------------------------------------------------------------------------


def _set_error(current: Span, error_type: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    current.set_attribute("error.type", error_type)
    current.set_status(Status(StatusCode.ERROR))  # no description: only the type is said


def _class_name(error: BaseException) -> str:
    return type(error).__name__


@contextlib.contextmanager
def span(
    name: str,
    *,
    kind: str = "internal",
    attributes: Mapping[str, Any] | None = None,
    parent: Context | None = None,
    error_type: Callable[[BaseException], str] = _class_name,
) -> Iterator[Span | None]:
    """A span `name`, current in the block; None when traces are off.

    `kind`: `internal`, `client`, `producer` or `consumer`. `parent`: the
    context it goes under, else this thread's current span. An exception
    leaving the block sets status ERROR and `error.type` to
    `error_type(exception)` (its class name by default) and goes on.
    """
    tracer = _tracer
    if tracer is None:
        yield None
        return
    from opentelemetry.trace import SpanKind

    with tracer.start_as_current_span(
        name,
        context=parent,
        kind=SpanKind[kind.upper()],
        attributes=dict(attributes or {}),
        record_exception=False,  # it would write the exception's message
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except Exception as error:
            _set_error(current, error_type(error))
            raise


def traced(
    name: str, *, result_attributes: Callable[[Any], Mapping[str, Any]] | None = None
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function to run in a span `name` (`span`'s errors); `result_attributes(result)` are added
    to it when the function returns."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            if _tracer is None:
                return function(*args, **kwargs)
            with span(name) as current:
                result = function(*args, **kwargs)
                if current is not None and result_attributes is not None:
                    current.set_attributes(dict(result_attributes(result)))
                return result

        return wrapper

    return decorate


def current_context() -> Context | None:
    """This thread's trace context, to hand to another thread (`span(parent=...)`); None when off."""
    if _tracer is None:
        return None
    from opentelemetry import context

    return context.get_current()


def carried(function: Callable[P, R]) -> Callable[P, R]:
    """`function`, to be run by another thread (a pool's) under this thread's current span."""
    captured = current_context()
    if captured is None:
        return function
    from opentelemetry import context

    @functools.wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        token = context.attach(captured)
        try:
            return function(*args, **kwargs)
        finally:
            context.detach(token)

    return run


def turn_failed(kind: str) -> None:
    """The turn run by the current span (the worker's `process` span) failed: status ERROR, `error.type` `kind`
    (the `error` event's type: `overloaded_error`, `max_steps`, ...)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    current = trace.get_current_span()
    if current.is_recording():
        _set_error(current, kind)


def add_event(name: str, attributes: Mapping[str, Any]) -> None:
    """An event `name` on the current span (`tool_timed_out` with `gen_ai.tool.name`)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    trace.get_current_span().add_event(name, dict(attributes))


# --- the job engine: the task's W3C trace context in its headers ---------------------------------------------------


def messaging_system(broker_url: str) -> str:
    """`messaging.system` for a Celery broker URL: `rabbitmq` for AMQP, else the URL's scheme (`sqlite` for the
    embedded broker, `memory`, `redis`). Only the scheme is read: the URL itself holds a password."""
    scheme = broker_url.split("://", 1)[0].lower()
    return "rabbitmq" if scheme in ("amqp", "amqps", "pyamqp") else scheme


@contextlib.contextmanager
def task_send(task: str, *, attributes: Mapping[str, Any]) -> Iterator[dict[str, str]]:
    """A PRODUCER span `send {task}` around queueing a task; yields the headers to send it with: the span's
    W3C trace context (`traceparent`, and `tracestate` when there is one) and `silvia_sent_at` (epoch
    seconds). Off, yields `{}`."""
    operation = {"messaging.operation.name": "send", "messaging.operation.type": "send"}
    with span(f"send {task}", kind="producer", attributes={**operation, **attributes}) as current:
        if current is None:
            yield {}
            return
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        headers: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(headers)
        headers[SENT_AT_HEADER] = f"{time.time():.6f}"
        yield headers


@contextlib.contextmanager
def task_process(task: str, *, headers: Mapping[str, Any] | None, attributes: Mapping[str, Any]) -> Iterator[None]:
    """A CONSUMER span `process {task}` around running a task, under the trace context in its `headers` (a
    new trace without one), with `silvia.queue.wait_seconds`: from its sending to now (a redelivered task's
    includes the run of the worker that died)."""
    if _tracer is None:
        yield
        return
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {key: value for key, value in (headers or {}).items() if isinstance(value, str)}
    parent = TraceContextTextMapPropagator().extract(carrier)
    extra = {"messaging.operation.name": "process", "messaging.operation.type": "process", **attributes}
    with contextlib.suppress(KeyError, ValueError):  # none: sent by a web process without traces
        extra["silvia.queue.wait_seconds"] = max(0.0, time.time() - float(carrier[SENT_AT_HEADER]))
    with span(f"process {task}", kind="consumer", attributes=extra, parent=parent):
        yield
