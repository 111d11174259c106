"""`silvia.asgi`: a request's sync work in one thread hop, on request threads kept between requests."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from django.core import signals
from django.core.handlers.asgi import ASGIHandler

from silvia.asgi import RequestThreads, application
from tests.factories import ChatLogFactory, ChatSessionFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _get(
    path: str, headers: list[tuple[bytes, bytes]] | None = None, sent: list[dict] | None = None
) -> tuple[int, bytes]:
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *(headers or [])], "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
    }  # fmt: skip
    messages = [{"type": "http.request", "body": b"", "more_body": False}]
    sent = [] if sent is None else sent

    async def receive() -> dict:
        if messages:
            return messages.pop()
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(application(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def test_started_view_and_finished_run_on_one_kept_thread(monkeypatch):
    seen: list[tuple[str, int]] = []

    def started(**kwargs: object) -> None:
        seen.append(("started", threading.get_ident()))

    def finished(**kwargs: object) -> None:
        seen.append(("finished", threading.get_ident()))

    signals.request_started.connect(started)
    signals.request_finished.connect(finished)
    try:
        assert _get("/healthz")[0] == 200
        assert _get("/healthz")[0] == 200
    finally:
        signals.request_started.disconnect(started)
        signals.request_finished.disconnect(finished)
    assert [name for name, _ in seen] == ["started", "finished"] * 2
    threads = {thread for _, thread in seen}
    # One worker thread for everything, the same for both requests, not the caller's.
    assert len(threads) == 1 and threading.get_ident() not in threads


def test_the_chain_is_the_sync_one():
    assert isinstance(application, ASGIHandler)
    assert not asyncio.iscoroutinefunction(application._middleware_chain)  # type: ignore[attr-defined]


def test_the_api_answers_through_it(token_client):
    token = token_client._credentials["HTTP_AUTHORIZATION"].encode()
    status, body = _get("/api/chat/sessions/", [(b"authorization", token)])
    assert (status, body) == (200, b'{"count":0,"next":null,"previous":null,"results":[]}')
    assert _get("/api/chat/sessions/")[0] == 401


def test_request_threads_keep_at_most_the_idle_count():
    threads = RequestThreads(keep=1)
    first, second = threads.acquire(), threads.acquire()
    assert first is not second
    threads.release(first)
    threads.release(second)  # over the idle count: shut down
    assert threads.acquire() is first
    with pytest.raises(RuntimeError):
        second.submit(print)


def test_a_body_is_sent_in_one_message_not_djangos_64_kib_slices(token_client, maya):
    session = ChatSessionFactory.create(user=maya)
    ChatLogFactory.create_batch(3, session=session, response="x" * 40_000)
    token = token_client._credentials["HTTP_AUTHORIZATION"].encode()
    sent: list[dict] = []
    status, body = _get(f"/api/chat/sessions/{session.pk}", [(b"authorization", token)], sent)
    assert status == 200 and len(body) > 120_000
    assert [message["type"] for message in sent] == ["http.response.start", "http.response.body"]
    assert not sent[1].get("more_body", False)
    assert json.loads(body)["messages"][2]["response"] == "x" * 40_000
