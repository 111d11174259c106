"""The model API client of live turns: one SDK client per configuration and thread, its timing and its span."""

from __future__ import annotations

import contextlib
import ssl
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import anthropic
import httpx2
from django.conf import settings

from live.errors import failure_from_exception
from live.log import LostTurnError
from telemetry import genai, metrics

if TYPE_CHECKING:
    from live.model_step import StepStream

__all__ = ["model_client", "model_request_timed"]


_local = threading.local()
_tls_lock = threading.Lock()
_tls: list[ssl.SSLContext] = []


def _tls_context() -> ssl.SSLContext:
    """The process's one TLS context for the model API, httpx2's default one (`SSL_CERT_FILE` or
    `SSL_CERT_DIR`, else the system's CA paths), shared by every thread's client: building one reads them."""
    with _tls_lock:
        if not _tls:
            _tls.append(httpx2.create_ssl_context())
        return _tls[0]


def model_client() -> anthropic.Anthropic:
    """The SDK client of this thread, configured from settings (key, base URL, timeout, retry budget).

    One per configuration and thread, kept for the thread's next turns, all
    sharing one TLS context. Not one per process: the SDK client is
    thread-safe, but its connection pool (httpcore's) scans every connection
    and every waiting request under one lock at each request and each
    response's close, so with a worker's 50 turn threads on one pool that
    scan was 3.8% of the worker's CPU (py-spy, 100 turns at once;
    bench/README.md). A thread runs one turn at a time, so its pool holds one
    connection to the API, the same count as one shared pool holding 50.
    """
    key = (
        settings.ANTHROPIC_API_KEY,
        settings.ANTHROPIC_BASE_URL,
        settings.ANTHROPIC_TIMEOUT_SECONDS,
        settings.ANTHROPIC_MAX_RETRIES,
    )
    clients: dict[tuple[Any, ...], anthropic.Anthropic] = _local.__dict__.setdefault("clients", {})
    client = clients.get(key)
    if client is None:
        client = clients[key] = anthropic.Anthropic(
            api_key=settings.ANTHROPIC_API_KEY or "no-key-configured",
            base_url=settings.ANTHROPIC_BASE_URL,
            timeout=settings.ANTHROPIC_TIMEOUT_SECONDS,
            max_retries=settings.ANTHROPIC_MAX_RETRIES,
            # Each attempt's status and the SDK's retries, counted (silvia_model_http_responses_total).
            http_client=anthropic.DefaultHttpxClient(
                event_hooks=metrics.model_http_event_hooks(), verify=_tls_context()
            ),
            # The SDK's own spans off: our `chat` span is the request's (docs/metrics.md#traces), and theirs
            # would record the prompt and the answer if ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE said so.
            open_telemetry=False,
        )
    return client


def _failure_kind(error: BaseException) -> str:
    """The `chat` span's `error.type`: the failure's kind, or `LostTurnError` when another worker took the turn."""
    return type(error).__name__ if isinstance(error, LostTurnError) else failure_from_exception(error).kind


@contextlib.contextmanager
def model_request_timed(request: Mapping[str, Any], step: StepStream) -> Iterator[None]:
    """One model step's request in `silvia_model_request_seconds` (`ok`, or the failure's kind) and its
    `chat {model}` span, which gets what `step`'s message says of the answer: model, id, usage, stop reason."""
    started, outcome = time.perf_counter(), "ok"
    with genai.model_request_span(
        model=request["model"], max_tokens=request["max_tokens"], error_type=_failure_kind
    ) as span:
        try:
            yield
        except LostTurnError:
            outcome = ""  # another worker took the turn: this one stopped reading, the model did not fail
            raise
        except Exception as error:
            outcome = failure_from_exception(error).kind
            raise
        finally:
            genai.model_response(span, step.message)
            if outcome:
                metrics.model_request(seconds=time.perf_counter() - started, outcome=outcome)
