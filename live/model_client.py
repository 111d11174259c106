"""The model API client of live turns: SDK clients lent one model request at a time, its timing and its span."""

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


_idle: dict[tuple[Any, ...], list[anthropic.Anthropic]] = {}
_idle_lock = threading.Lock()
_tls: list[ssl.SSLContext] = []


def _tls_context() -> ssl.SSLContext:
    """The process's one TLS context for the model API, httpx2's default one (`SSL_CERT_FILE` or
    `SSL_CERT_DIR`, else the system's CA paths), shared by every client: building one reads them.
    Called under `_idle_lock`."""
    if not _tls:
        _tls.append(httpx2.create_ssl_context())
    return _tls[0]


def _new_client() -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key=settings.ANTHROPIC_API_KEY or "no-key-configured",
        base_url=settings.ANTHROPIC_BASE_URL,
        timeout=settings.ANTHROPIC_TIMEOUT_SECONDS,
        max_retries=settings.ANTHROPIC_MAX_RETRIES,
        # Each attempt's status and the SDK's retries, counted (silvia_model_http_responses_total).
        http_client=anthropic.DefaultHttpxClient(event_hooks=metrics.model_http_event_hooks(), verify=_tls_context()),
        # The SDK's own spans off: our `chat` span is the request's (docs/metrics.md#traces), and theirs
        # would record the prompt and the answer if ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE said so.
        open_telemetry=False,
    )


@contextlib.contextmanager
def model_client() -> Iterator[anthropic.Anthropic]:
    """An SDK client configured from settings (key, base URL, timeout, retry budget), this caller's alone
    until the block ends; then it is kept for the next caller of the same configuration.

    The most recently given back is lent first (a stack), so while turns are
    few one client, and its connection to the API, serves them all, still
    open; at most as many clients as model requests at once (a worker's
    threads), all sharing one TLS context. Not one client for the process:
    the SDK client is thread-safe, but its connection pool (httpcore's)
    scans every connection and every waiting request under one lock at each
    request and each response's close, and with a worker's 50 turn threads
    on one pool that scan was 3.8% of the worker's CPU (py-spy, 100 turns at
    once; bench/README.md). Not one per thread either: Celery's thread pool
    (a `ThreadPoolExecutor`) hands a task to whichever idle thread wakes
    first, not the one used last, so after a burst a turn would mostly find
    its thread's connection closed by the keep-alive expiry.
    """
    key = (
        settings.ANTHROPIC_API_KEY,
        settings.ANTHROPIC_BASE_URL,
        settings.ANTHROPIC_TIMEOUT_SECONDS,
        settings.ANTHROPIC_MAX_RETRIES,
    )
    with _idle_lock:
        idle = _idle.setdefault(key, [])
        client = idle.pop() if idle else _new_client()
    try:
        yield client
    finally:
        with _idle_lock:
            idle.append(client)


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
