"""The stream process's admission gate for turn POSTs (docs/live.md#admission), in front of Django, on the event loop.

A burst of POSTs must be answered at once and must not take the pooled
connections from the streams' reads. So a POST that starts a turn waits for
one of `LIVE_TURN_ADMISSIONS_AT_ONCE` slots here, as a coroutine (no thread,
no database connection), at most `LIVE_TURN_ADMISSION_WAIT_SECONDS`; then it
is refused, `503` with `Retry-After`, having touched nothing (at once, when
the wait it faces is already longer). A POST holding
a slot goes into Django (authentication, the admission's transaction); its
slot is given back when its response starts (an admitted turn's stream
follows without it: its reads borrow connections of their own) or when its
request ends. The wait first, the connection after: the view's thread takes
its connection only once the slot is held.

Under WSGI (gunicorn's bounded threads) `live.service.turn_start` bounds the
admissions with a semaphore of the same size instead, taken with no
connection held.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

__all__ = ["BUSY_DETAIL", "AdmissionGate", "busy_response_parts", "pool_shortfall", "turn_post", "warn_if_pool_small"]

logger = logging.getLogger(__name__)

#: Pooled connections a stream process keeps for the requests that are neither an admission nor a log read
#: (a reconnect's first query, a stop): docs/deploying.md#database-connections.
OTHER_REQUESTS = 2

#: The refusal's `detail`, the same words as `live.views` answers `AdmissionBusyError` with.
BUSY_DETAIL = "Too many questions are arriving at once. Please try again shortly."


def busy_response_parts(retry_after_seconds: int) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The headers and body of the gate's `503`: JSON `{"detail": BUSY_DETAIL}`, `Retry-After` in whole seconds."""
    body = json.dumps({"detail": BUSY_DETAIL}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(retry_after_seconds).encode()),
        (b"vary", b"Accept, Cookie"),
    ]
    return headers, body


class AdmissionGate:
    """An ASGI middleware: the requests `gated(scope)` names (the turn POSTs) run `at_once` at a time in this
    process; one that would wait longer than `wait_seconds` for a slot is answered `503` with
    `Retry-After: retry_after` and never reaches `app`. A slot is held from the request's entry into `app`
    to its response's start (or the request's end, whichever comes first). Slots are per event loop
    (`asyncio.Semaphore`), made on the first gated request.

    A request is refused at once, not after its wait, when the wait it faces is already longer than
    `wait_seconds` (`expected_wait`: the requests ahead of it times the slot's usual hold, over `at_once`):
    past what a process admits, a burst has its answers in milliseconds, and the event loop spends no time
    on requests it would refuse anyway. Before any slot was given back there is no usual hold yet: the
    request waits, up to `wait_seconds`."""

    #: The weight of the last hold in the usual one (an exponentially weighted mean).
    hold_weight = 0.2

    def __init__(
        self,
        app: Any,
        *,
        at_once: int,
        wait_seconds: float,
        retry_after: int,
        gated: Callable[[dict[str, Any]], bool],
    ) -> None:
        if at_once < 1:
            raise ValueError(f"at_once must be at least 1, not {at_once}")
        self.app, self.at_once, self.wait_seconds, self.retry_after = app, at_once, wait_seconds, retry_after
        self.gated = gated
        self._slots: asyncio.Semaphore | None = None
        self.waiting = 0  # requests waiting for a slot now
        self.usual_hold: float | None = None  # seconds a slot is held, weighted towards the latest
        self.refused = 0  # requests answered 503 by the gate since start (the tests and benches read it)

    def slots(self) -> asyncio.Semaphore:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.at_once)
        return self._slots

    def expected_wait(self) -> float:
        """Seconds a request arriving now would wait for a slot: 0 with one free; else the requests waiting
        ahead of it, and itself, times the usual hold over `at_once` (0 before any hold was measured)."""
        if not self.slots().locked() or self.usual_hold is None:
            return 0.0
        return (self.waiting + 1) * self.usual_hold / self.at_once

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self.gated(scope):
            await self.app(scope, receive, send)
            return
        slots = self.slots()
        if self.expected_wait() > self.wait_seconds:
            await self._refuse(send)
            return
        self.waiting += 1
        try:
            async with asyncio.timeout(self.wait_seconds):
                await slots.acquire()
        except TimeoutError:
            await self._refuse(send)
            return
        finally:
            self.waiting -= 1
        taken, held = time.monotonic(), True

        def give_back() -> None:
            nonlocal held
            if held:
                held = False
                hold = time.monotonic() - taken
                last = self.usual_hold
                self.usual_hold = hold if last is None else last + self.hold_weight * (hold - last)
                slots.release()

        async def send_then_give_back(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                give_back()
            await send(message)

        try:
            await self.app(scope, receive, send_then_give_back)
        finally:
            give_back()

    async def _refuse(self, send: Any) -> None:
        self.refused += 1
        headers, body = busy_response_parts(self.retry_after)
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def turn_post(scope: dict[str, Any]) -> bool:
    """Whether an ASGI request is a turn POST (`live.urls`' `turn-create`). Resolving a path reads no database."""
    if scope.get("method") != "POST":
        return False
    from django.urls import Resolver404, resolve

    try:
        return resolve(scope["path"]).url_name == "turn-create"
    except Resolver404:
        return False


def pool_shortfall(*, pool_max_size: int | None, admissions_at_once: int, read_threads: int) -> int:
    """How many connections a stream process's pool lacks to serve its admissions, its log readers and
    `OTHER_REQUESTS` at once without waiting for one (docs/deploying.md#database-connections); 0 when it has
    them or there is no pool (`pool_max_size` None: SQLite, `DATABASE_POOL=false`)."""
    if pool_max_size is None:
        return 0
    return max(0, admissions_at_once + read_threads + OTHER_REQUESTS - pool_max_size)


def warn_if_pool_small() -> None:
    """One warning at a stream process's start when its pool is smaller than `pool_shortfall` asks: a burst
    would then wait for connections (the reads retry, the admissions take longer)."""
    from django.conf import settings
    from django.db import connection

    pool = connection.settings_dict.get("OPTIONS", {}).get("pool")
    size = pool.get("max_size") if isinstance(pool, dict) else None
    lacking = pool_shortfall(
        pool_max_size=size,
        admissions_at_once=settings.LIVE_TURN_ADMISSIONS_AT_ONCE,
        read_threads=settings.LIVE_SSE_READ_THREADS,
    )
    if lacking:
        logger.warning(
            "DATABASE_POOL_MAX_SIZE %d is %d below LIVE_TURN_ADMISSIONS_AT_ONCE + LIVE_SSE_READ_THREADS + %d: "
            "admissions and stream reads may wait for a connection (docs/deploying.md#database-connections)",
            size,
            lacking,
            OTHER_REQUESTS,
        )
