"""Every Prometheus metric of the service, defined here and nowhere else (docs/metrics.md).

The official `prometheus-client`. Production runs several uvicorn workers
and worker processes, so it runs in the client's multiprocess mode when
`PROMETHEUS_MULTIPROC_DIR` names a directory shared by the processes of one
host (each writes its own memory-mapped files; a scrape of any of them adds
them up). Without it, each process exports only its own figures.

Three kinds of figures:

- **recorded by processes** (counters, histograms, `livesum` gauges): one
  function per point below (`turn_finished`, `first_text`, `model_request`,
  `tool_call`, `turns_imported`, `backfill_batch`, ...), called where the
  thing happens;
- **read from the database at scrape time** (`live.collector.LiveTurnsCollector`, passed to `render`): turns by
  state, failures by error type and the queue depth. The database already
  holds them, whichever process ran a turn; a gauge kept by processes
  would be wrong after a worker is killed mid-turn, and needs no
  coordination this way (one indexed GROUP BY per scrape);
- **sampled**: the database pool's use (`sample_pool`, after requests and around a worker's tasks).

This module is imported only by what records or serves a figure (never at
`django.setup()`: tests/silvia/test_startup.py), so a command that records nothing
pays nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client import multiprocess as _multiprocess
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

__all__ = [
    "backfill_batch",
    "citation_support",
    "count_open_stream",
    "first_text",
    "model_http_event_hooks",
    "model_request",
    "multiprocess_dir",
    "process_dead",
    "process_exiting",
    "render",
    "sample_pool",
    "tool_call",
    "tool_timed_out",
    "turn_finished",
    "turns_imported",
]

# A `_created` timestamp beside every counter doubles the series for nothing Prometheus needs.
disable_created_metrics()

# --- live turns (recorded by the turn worker: docs/metrics.md#where-live-turns-record-them) ------------------

TURNS_FINISHED = Counter(
    "silvia_turns_finished_total",
    "Live turns that ended, by outcome (done, failed) and error type (the error event's type; empty when done).",
    ["outcome", "error_type"],
)
TURN_DURATION = Histogram(
    "silvia_turn_duration_seconds",
    "From a live turn's start (its POST) to its done or error event, by outcome.",
    ["outcome"],
    buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
)
FIRST_TEXT = Histogram(
    "silvia_turn_first_text_seconds",
    "From a live turn's start (its POST) to its first text event.",
    buckets=(0.25, 0.5, 1, 2, 3, 5, 8, 13, 20, 30, 60),
)
MODEL_REQUEST = Histogram(
    "silvia_model_request_seconds",
    "One model step: from opening the Messages API stream to its final message (SDK retries included), by outcome.",
    ["outcome"],
    buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120),
)
MODEL_RETRIES = Counter(
    "silvia_model_request_retries_total",
    "HTTP requests to the model API that were the SDK's retries (429, 529, 5xx, connection errors).",
)
MODEL_RESPONSES = Counter(
    "silvia_model_http_responses_total",
    "HTTP responses from the model API (each attempt), by status code.",
    ["status"],
)

# --- tools -----------------------------------------------------------------------------------------------------

TOOL_CALLS = Counter(
    "silvia_tool_calls_total",
    "Tool calls that ended, by tool and outcome (ok; tool_error: refused with a reason; error: raised).",
    ["tool", "outcome"],
)
TOOL_DURATION = Histogram(
    "silvia_tool_call_seconds",
    "How long a tool call ran, by tool (whatever its outcome).",
    ["tool"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
TOOL_TIMEOUTS = Counter(
    "silvia_tool_timeouts_total",
    "Tool calls the turn stopped waiting for (LIVE_TOOL_TIMEOUT_SECONDS), by tool.",
    ["tool"],
)

# --- HTTP, database ------------------------------------------------------------------------------------------------

SSE_OPEN = Gauge(
    "silvia_sse_streams_open",
    "SSE streams being served now, by view (turn: the POST; events: a reconnect).",
    ["view"],
    multiprocess_mode="livesum",
)
POOL_CONNECTIONS = Gauge(
    "silvia_db_pool_connections",
    "Connections of the database pool, by state (in_use, idle); sampled after requests and tasks.",
    ["alias", "state"],
    multiprocess_mode="livesum",
)
POOL_WAITING = Gauge(
    "silvia_db_pool_requests_waiting",
    "Requests waiting for a pool connection when last sampled.",
    ["alias"],
    multiprocess_mode="livesum",
)
POOL_REQUESTS = Counter(
    "silvia_db_pool_requests_total", "Connections asked of the pool (psycopg-pool requests_num).", ["alias"]
)
POOL_WAIT = Counter(
    "silvia_db_pool_wait_seconds_total", "Time spent waiting for a pool connection (requests_wait_ms).", ["alias"]
)
POOL_ERRORS = Counter(
    "silvia_db_pool_errors_total", "Requests the pool could not serve in time (requests_errors).", ["alias"]
)

# --- imports and backfill -----------------------------------------------------------------------------------------

IMPORTED = Counter(
    "silvia_imported_turns_total",
    "Turn records read by import_turns, by outcome (imported, skipped: already stored, failed).",
    ["outcome"],
)
BACKFILL_ROWS = Counter(
    "silvia_backfill_rows_total",
    "ai_chat_logs rows the backfill went through (not dry runs), by result (scanned, changed, malformed).",
    ["result"],
)
BACKFILL_TYPED = Counter(
    "silvia_backfill_citations_typed_total", "Citation targets the backfill added, by target kind.", ["kind"]
)

# --- citation support (SPEC 15, docs/support.md) ------------------------------------------------------------

CITATION_SUPPORT = Counter(
    "silvia_citation_support_total",
    "Inline citations of the turns stored, by how the turn came (live, import, record) and support status "
    "(supported, partly_supported, unsupported, unchecked; none: it could not be computed).",
    ["path", "status"],
)


# --- the functions, one per point ------------------------------------------------------------------------------


def turn_finished(*, outcome: str, error_type: str | None = None, seconds: float) -> None:
    """A live turn ended: `outcome` is `done` or `failed`, `error_type` the error event's `type`
    (e.g. `overloaded_error`), `seconds` since its start."""
    TURNS_FINISHED.labels(outcome=outcome, error_type=error_type or "").inc()
    TURN_DURATION.labels(outcome=outcome).observe(seconds)


def first_text(*, seconds: float) -> None:
    """A live turn sent its first `text` event, `seconds` after its start (once per turn)."""
    FIRST_TEXT.observe(seconds)


def model_request(*, seconds: float, outcome: str = "ok") -> None:
    """One model step's request ended: `ok`, or the failure's kind (`overloaded_error`, `timeout_error`, ...)."""
    MODEL_REQUEST.labels(outcome=outcome).observe(seconds)


def _count_retry(request: Any) -> None:
    # The SDK numbers each attempt of a request in this header (0 for the first).
    if request.headers.get("x-stainless-retry-count", "0") not in ("", "0"):
        MODEL_RETRIES.inc()


def _count_response(response: Any) -> None:
    MODEL_RESPONSES.labels(status=str(response.status_code)).inc()


def model_http_event_hooks() -> dict[str, list[Callable[[Any], None]]]:
    """httpx event hooks that count the SDK's retries and the API's responses: pass them to the client,
    `anthropic.Anthropic(..., http_client=anthropic.DefaultHttpxClient(event_hooks=model_http_event_hooks()))`."""
    return {"request": [_count_retry], "response": [_count_response]}


def tool_call(*, tool: str, seconds: float, outcome: str) -> None:
    """A tool call ended: `outcome` is `ok`, `tool_error` (a `ToolError`) or `error` (anything else raised)."""
    TOOL_CALLS.labels(tool=tool, outcome=outcome).inc()
    TOOL_DURATION.labels(tool=tool).observe(seconds)


def tool_timed_out(*, tool: str) -> None:
    """The turn stopped waiting for a tool call (`LIVE_TOOL_TIMEOUT_SECONDS`)."""
    TOOL_TIMEOUTS.labels(tool=tool).inc()


def turns_imported(*, outcome: str, count: int = 1) -> None:
    """`count` turn records of an import ended as `imported`, `skipped` or `failed`."""
    IMPORTED.labels(outcome=outcome).inc(count)


def backfill_batch(*, scanned: int, changed: int, malformed: int, typed: Mapping[str, int]) -> None:
    """One committed backfill batch: rows scanned, changed and skipped as malformed; targets added by kind."""
    for result, count in (("scanned", scanned), ("changed", changed), ("malformed", malformed)):
        if count:
            BACKFILL_ROWS.labels(result=result).inc(count)
    for kind, count in typed.items():
        BACKFILL_TYPED.labels(kind=kind).inc(count)


def citation_support(*, path: str, statuses: Mapping[str, int]) -> None:
    """A turn was stored (`path`: `live`, `import` or `record`): its inline citations, counted by support status."""
    for status, count in statuses.items():
        if count:
            CITATION_SUPPORT.labels(path=path, status=status).inc(count)


def count_open_stream(stream: Any, *, view: str) -> Any:
    """`stream` (an SSE iterator, sync or async) counted in `silvia_sse_streams_open` while it is served."""
    gauge = SSE_OPEN.labels(view=view)
    if hasattr(stream, "__aiter__"):
        return _count_async(stream, gauge)
    return _count_sync(stream, gauge)


def _count_sync(stream: Iterable[bytes], gauge: Any) -> Iterator[bytes]:
    gauge.inc()
    try:
        yield from stream
    finally:
        gauge.dec()


async def _count_async(stream: AsyncIterator[bytes], gauge: Any) -> AsyncIterator[bytes]:
    gauge.inc()
    try:
        async for chunk in stream:
            yield chunk
    finally:
        gauge.dec()


_pool_sampled_at = 0.0
_pool_lock = threading.Lock()


def sample_pool(*, every_seconds: float = 1.0) -> None:
    """Record the database pools' use (Django 5.2's psycopg-pool), at most once per `every_seconds`.

    Gauges: connections in use and idle, requests waiting. Counters: the
    pool's own counters since the last sample (`pop_stats`). No pool (SQLite,
    `DATABASE_POOL=false`): nothing.
    """
    global _pool_sampled_at
    from django.db import connections

    now = time.monotonic()
    with _pool_lock:
        if now - _pool_sampled_at < every_seconds:
            return
        _pool_sampled_at = now
    for alias in connections:
        pool = getattr(connections[alias], "pool", None)
        if pool is None:
            continue
        stats = pool.pop_stats()
        size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
        POOL_CONNECTIONS.labels(alias=alias, state="in_use").set(size - idle)
        POOL_CONNECTIONS.labels(alias=alias, state="idle").set(idle)
        POOL_WAITING.labels(alias=alias).set(stats.get("requests_waiting", 0))
        POOL_REQUESTS.labels(alias=alias).inc(stats.get("requests_num", 0))
        POOL_WAIT.labels(alias=alias).inc(stats.get("requests_wait_ms", 0) / 1000)
        POOL_ERRORS.labels(alias=alias).inc(stats.get("requests_errors", 0))


# --- scraping ---------------------------------------------------------------------------------------------------


def multiprocess_dir() -> Path | None:
    """The directory of multiprocess mode (`PROMETHEUS_MULTIPROC_DIR`), or None: one process's figures."""
    value = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    return Path(value) if value else None


def process_exiting() -> None:
    """This process is stopping (a turn worker's shutdown): in multiprocess mode its `livesum` gauges
    stop counting now, not at the next scrape; its counters and histograms stay in the sums."""
    process_dead(os.getpid())


def process_dead(pid: int) -> None:
    """Process `pid` ended (a gunicorn worker, from the master's `child_exit`): `process_exiting` for it."""
    directory = multiprocess_dir()
    if directory is not None:
        _multiprocess.mark_process_dead(pid, str(directory))


_LIVE_FILE = re.compile(r"^gauge_live\w+_(\d+)\.db$")


def _forget_dead_processes(directory: Path) -> None:
    """Drop the `livesum` gauge files of processes that are gone (a killed worker's open streams)."""
    for path in directory.iterdir():
        match = _LIVE_FILE.match(path.name)
        if not match:
            continue
        pid = int(match.group(1))
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            _multiprocess.mark_process_dead(pid, str(directory))
        except PermissionError:
            pass  # alive, another user's


def render(database: Iterable[Collector] = ()) -> tuple[bytes, str]:
    """The exposition (Prometheus text format) and its content type: every process's figures in
    multiprocess mode (this process's otherwise), then those `database`'s collectors read at scrape
    time (`live.collector.LiveTurnsCollector`)."""
    sample_pool(every_seconds=0)
    directory = multiprocess_dir()
    if directory is not None:
        _forget_dead_processes(directory)
        registry = CollectorRegistry()
        _multiprocess.MultiProcessCollector(registry, path=str(directory))
        processes = generate_latest(registry)
    else:
        processes = generate_latest(REGISTRY)
    registry = CollectorRegistry()
    for collector in database:
        registry.register(collector)
    with contextlib.suppress(Exception):
        return processes + generate_latest(registry), CONTENT_TYPE_LATEST
    # The database is down: the processes' figures still say a lot (/readyz says why).
    return processes, CONTENT_TYPE_LATEST
