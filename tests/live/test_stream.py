"""A stream read that fails does not end an admitted turn's stream (issue 38 item 4; docs/live.md): `async_stream`
reads again, backing off, a keep-alive each time; past `LIVE_SSE_READ_RETRIES` failures in a row it ends, its last
frame the `retry:` that tells an EventSource to reconnect. The log's reads are the test's here (a read the pool
refuses, then answers): the retried stream with a real pool is `tests/live/test_admission.py`'s burst."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from django.db import OperationalError

import live.stream
from live.sse import KEEPALIVE, format_retry, format_sse
from live.stream import Opened, async_stream, read_backoff_seconds
from live.wakeups import Feed


def test_the_backoff_doubles_from_a_quarter_second_up_to_four():
    assert [read_backoff_seconds(n) for n in range(1, 8)] == [0.25, 0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


class _Reads:
    """`read_log` refusing its first `failures` calls (as psycopg-pool's timeout reaches Django), then the turn's
    two events."""

    def __init__(self, failures: int) -> None:
        self.failures, self.calls = failures, 0

    def __call__(self, turn_id: uuid.UUID, after: int):
        self.calls += 1
        if self.calls <= self.failures:
            raise OperationalError("couldn't get a connection after 10.00 sec")
        return [(1, "turn", '{"n":1}'), (2, "done", '{"n":2}')], False, None


def _drain(turn_id: uuid.UUID, closed: list[bool]) -> list[bytes]:
    async def run() -> list[bytes]:
        return [frame async for frame in async_stream(turn_id, 0, on_close=lambda: closed.append(True))]

    return asyncio.run(run())


@pytest.fixture
def polling(monkeypatch, settings):
    settings.LIVE_SSE_RETRY_MS = 3000
    monkeypatch.setattr(live.stream.db, "listens", lambda: False)  # the stream polls, as on SQLite


def test_a_read_that_fails_is_read_again_and_the_stream_goes_on(polling, monkeypatch, settings):
    settings.LIVE_SSE_READ_RETRIES = 3
    reads = _Reads(failures=2)
    monkeypatch.setattr(live.stream, "read_log", reads)
    closed: list[bool] = []
    frames = _drain(uuid.uuid4(), closed)
    assert frames == [
        b"retry: 3000\n\n",
        KEEPALIVE,
        KEEPALIVE,
        format_sse(1, "turn", '{"n":1}') + format_sse(2, "done", '{"n":2}'),
    ]
    assert (reads.calls, closed) == (3, [True])


def test_past_its_retries_the_stream_ends_telling_the_client_to_reconnect(polling, monkeypatch, settings):
    settings.LIVE_SSE_READ_RETRIES = 2
    reads = _Reads(failures=10)
    monkeypatch.setattr(live.stream, "read_log", reads)
    closed: list[bool] = []
    frames = _drain(uuid.uuid4(), closed)
    assert frames == [b"retry: 3000\n\n", KEEPALIVE, KEEPALIVE, format_retry(3000)]
    assert (reads.calls, closed) == (3, [True])  # the first read and two retries


def test_an_opened_stream_starts_with_its_page_then_its_feed_without_reading_the_log(monkeypatch, settings):
    # A direct open (live.direct) follows the turn's feed, then reads the first page: the page answers the
    # stream's first read, and an event notified between that read and the stream's start is sent from the feed.
    settings.LIVE_SSE_RETRY_MS = 3000

    def no_read(turn_id: uuid.UUID, after: int):
        raise AssertionError("the log read again")

    monkeypatch.setattr(live.stream, "read_log", no_read)
    closed: list[bool] = []

    async def run() -> list[bytes]:
        feed = Feed()
        feed.put_nowait([(3, "done", '{"n":3}')])
        opened = Opened(feed, [(2, "text", '{"n":2}')])
        stream = async_stream(uuid.uuid4(), 1, on_close=lambda: closed.append(True), opened=opened)
        return [frame async for frame in stream]

    frames = asyncio.run(run())
    assert frames == [b"retry: 3000\n\n", format_sse(2, "text", '{"n":2}'), format_sse(3, "done", '{"n":3}')]
    assert closed == [True]


def test_a_stream_cancelled_as_its_feed_wakes_it_ends(settings):
    # The client left (live.handoff cancels the stream's task) in the same turn of the event loop as a
    # notification reached the stream's feed: the stream ends, its slot given back, however long its wait.
    # (Python 3.11's `asyncio.wait_for` returned the feed's item there and swallowed the cancellation: the
    # stream ran on, slot held, until its turn ended.)
    settings.LIVE_TURN_KEEPALIVE_SECONDS = 60
    closed: list[bool] = []

    async def run() -> tuple[bool, list[bytes]]:
        feed, sent = Feed(), []
        opened = Opened(feed, [(2, "text", '{"n":2}')])
        stream = async_stream(uuid.uuid4(), 1, on_close=lambda: closed.append(True), opened=opened)

        async def pump() -> None:
            async for frame in stream:
                sent.append(frame)

        task = asyncio.ensure_future(pump())
        deadline = time.monotonic() + 5
        while len(sent) < 2:  # the retry frame, then event 2: then it waits on its feed
            assert time.monotonic() < deadline, sent
            await asyncio.sleep(0)
        for _ in range(3):
            await asyncio.sleep(0)
        feed.put_nowait([(3, "text", '{"n":3}')])
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=2)
        return bool(done) and task.cancelled(), sent

    ended, sent = asyncio.run(run())
    assert sent == [b"retry: 3000\n\n", format_sse(2, "text", '{"n":2}')]
    assert (ended, closed) == (True, [True])
