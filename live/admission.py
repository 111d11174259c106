"""The stream process's admission gate for turn POSTs (docs/live.md#admission), in front of Django, on the event loop.

A burst of POSTs must be answered at once and must not take the pooled
connections from the streams' reads. So a POST that starts a turn waits for
one of `LIVE_TURN_ADMISSIONS_AT_ONCE` slots here, as a coroutine (no thread,
no database connection), at most `LIVE_TURN_ADMISSION_WAIT_SECONDS`; then it
is refused, `503` with `Retry-After`, having touched nothing (sooner, once
the wait it faces is longer than the time it has left). A POST holding a
slot goes into Django (authentication, the admission's transaction); its
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
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["BUSY_DETAIL", "AdmissionGate", "busy_response_parts", "pool_shortfall", "turn_post", "warn_if_pool_small"]

logger = logging.getLogger(__name__)

#: Pooled connections a stream process keeps for the requests that are neither an admission nor a log read
#: (a reconnect's first query, a stop): docs/deploying.md#database-connections.
OTHER_REQUESTS = 2

#: The refusal's `detail`, the gate's and `live.views`' (for `AdmissionBusyError`).
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
    to its response's start (or the request's end, whichever comes first), then handed to the longest
    waiting request. The gate lives on one event loop (no lock: its state changes between awaits only).

    A request is refused as soon as the wait it faces is longer than the time it has left (`expected_wait`:
    the requests ahead of it, and itself, times a slot's usual hold, over `at_once`), at its arrival or at
    any slot's give-back, whichever shows it first: past what a process admits, a burst has its answers
    within about one hold, and the event loop spends no time on requests it would refuse anyway. Before a
    slot was ever given back there is no usual hold: a request waits, up to `wait_seconds`."""

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
        self.free = at_once  # slots no request holds
        self.queue: deque[tuple[asyncio.Future[bool], float]] = deque()  # the waiters and their deadlines
        self.usual_hold: float | None = None  # seconds a slot is held, weighted towards the latest
        self.refused = 0  # requests answered 503 by the gate since start (the tests and benches read it)

    @property
    def waiting(self) -> int:
        return len(self.queue)

    def expected_wait(self, ahead: int) -> float:
        """Seconds a request with `ahead` requests waiting before it would wait for a slot, none being free:
        `(ahead + 1)` usual holds over `at_once` (0 before any hold was measured)."""
        return 0.0 if self.usual_hold is None else (ahead + 1) * self.usual_hold / self.at_once

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self.gated(scope):
            await self.app(scope, receive, send)
            return
        if not await self._take():
            self.refused += 1
            headers, body = busy_response_parts(self.retry_after)
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        taken, held = time.monotonic(), True

        def give_back() -> None:
            nonlocal held
            if held:
                held = False
                self._give_back(time.monotonic() - taken)

        async def send_then_give_back(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                give_back()
            await send(message)

        try:
            await self.app(scope, receive, send_then_give_back)
        finally:
            give_back()

    async def _take(self) -> bool:
        """Wait for a slot: True once held, False when refused."""
        if self.free and not self.queue:
            self.free -= 1
            return True
        if self.expected_wait(len(self.queue)) > self.wait_seconds:
            return False
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        entry = (waiter, time.monotonic() + self.wait_seconds)
        self.queue.append(entry)
        try:
            async with asyncio.timeout(self.wait_seconds):
                return await asyncio.shield(waiter)
        except TimeoutError:
            pass
        except BaseException:  # the client left (cancelled): a slot handed over meanwhile goes on
            if waiter.done() and waiter.result():
                self._give_back(None)
            elif entry in self.queue:
                self.queue.remove(entry)
            raise
        if waiter.done():
            return waiter.result()  # handed a slot (or refused) as the wait ran out
        self.queue.remove(entry)
        waiter.cancel()
        return False

    def _give_back(self, hold: float | None) -> None:
        """A slot is free: to the longest waiting request, else kept; then refuse every waiter that can no
        longer have one in its time. `hold`: how long the slot was held (None: not a measure)."""
        if hold is not None:
            last = self.usual_hold
            self.usual_hold = hold if last is None else last + self.hold_weight * (hold - last)
        if self.queue:
            waiter, _ = self.queue.popleft()
            waiter.set_result(True)
        else:
            self.free += 1
        now, kept = time.monotonic(), deque[tuple[asyncio.Future[bool], float]]()
        for waiter, deadline in self.queue:
            if self.expected_wait(len(kept)) > deadline - now:
                waiter.set_result(False)
            else:
                kept.append((waiter, deadline))
        self.queue = kept


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
