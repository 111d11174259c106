"""`silvia.asgi`: a request's sync work in one thread hop, on request threads kept between requests."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from django.core import signals
from django.core.handlers.asgi import ASGIHandler
from django.http import StreamingHttpResponse
from django.test.utils import override_settings
from django.urls import path

from silvia.asgi import RequestThreads, application

pytestmark = pytest.mark.django_db(transaction=True)


def _request(
    method: str,
    path: str,
    headers: list[tuple[bytes, bytes]] | None = None,
    chunks: list[bytes] | None = None,
    *,
    body_ends: bool = True,
    timeout: float = 20,
) -> tuple[int, dict[bytes, bytes], bytes]:
    """One request through `application` in process: the body in `chunks` (one `http.request` message each,
    the last one ending the body unless `body_ends` is false: a client still sending). Returns (status,
    headers, body); raises TimeoutError when no answer comes in `timeout` seconds."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *(headers or [])], "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
    }  # fmt: skip
    parts = chunks or [b""]
    messages = [
        {"type": "http.request", "body": part, "more_body": not body_ends or index < len(parts) - 1}
        for index, part in enumerate(parts)
    ]
    sent: list[dict] = []

    async def receive() -> dict:
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(asyncio.wait_for(application(scope, receive, send), timeout))
    return sent[0]["status"], dict(sent[0]["headers"]), b"".join(m.get("body", b"") for m in sent[1:])


def _get(path: str, headers: list[tuple[bytes, bytes]] | None = None) -> tuple[int, bytes]:
    status, _, body = _request("GET", path, headers)
    return status, body


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


TURNS = "/api/chat/sessions/3f0e8b0c-2d5c-4a57-9a51-0d6c5e2b9a11/turns/"


def _token_headers(token_client) -> list[tuple[bytes, bytes]]:
    token = token_client._credentials["HTTP_AUTHORIZATION"].encode()
    return [(b"authorization", token), (b"content-type", b"application/json")]


def test_a_body_without_content_length_is_parsed(token_client):
    # A chunked body (no Content-Length) reached DRF as no body at all: "message: This field is required."
    chunks = [b'{"mess', b'age": 12}']
    status, _, body = _request("POST", TURNS, _token_headers(token_client), chunks)
    assert (status, json.loads(body)) == (400, {"message": ["Expected a string."]})


def test_a_body_past_the_limit_is_a_413_before_it_ends(token_client, settings):
    # The client is still sending (no last chunk): the handler stops reading at the limit and answers,
    # instead of spooling an endless body to disk first.
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    chunks = [b'{"message": "', b"x" * 600, b"x" * 600]
    status, headers, body = _request("POST", TURNS, _token_headers(token_client), chunks, body_ends=False, timeout=10)
    assert (status, headers[b"Content-Type"]) == (413, b"application/json")
    assert json.loads(body) == {"detail": "The request body is larger than 1000 bytes."}


def test_a_declared_length_past_the_limit_is_a_413_unread(token_client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    headers = [*_token_headers(token_client), (b"content-length", b"5000")]
    status, _, body = _request("POST", TURNS, headers, [b"x" * 10], body_ends=False, timeout=10)
    assert (status, json.loads(body)) == (413, {"detail": "The request body is larger than 1000 bytes."})


def test_a_body_past_the_limit_elsewhere_is_the_400_page(settings, maya):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    csrf = [(b"cookie", b"csrftoken=" + b"a" * 32), (b"x-csrftoken", b"a" * 32)]
    form = [*csrf, (b"content-type", b"application/x-www-form-urlencoded")]
    status, headers, _ = _request("POST", "/login/", form, [b"u=" + b"x" * 2000], body_ends=False, timeout=10)
    assert status == 400 and headers[b"Content-Type"].startswith(b"text/html")


def test_a_body_at_the_limit_is_read(token_client, settings):
    body = json.dumps({"message": 12}).encode()
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = len(body)
    status, _, answer = _request("POST", TURNS, _token_headers(token_client), [body[:5], body[5:]])
    assert (status, json.loads(answer)) == (400, {"message": ["Expected a string."]})


# Streams that fail after their first chunk, served beside the project's URLs.
closed: list[str] = []


def _failing_chunks(name: str):
    try:
        yield b"first"
        raise RuntimeError("the stream broke")
    finally:
        closed.append(name)


async def _failing_async_chunks(name: str):
    try:
        yield b"first"
        raise RuntimeError("the stream broke")
    finally:
        closed.append(name)


urlpatterns = [
    path("stream-fails/", lambda request: StreamingHttpResponse(_failing_chunks("sync"))),
    path("astream-fails/", lambda request: StreamingHttpResponse(_failing_async_chunks("async"))),
]


@override_settings(ROOT_URLCONF=__name__)
@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators")
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_stream_that_fails_midway_is_still_closed_and_its_request_finished(kind):
    # Django's handler lets the exception out before `response.close()`: no `request_finished`, so the
    # request thread kept its database connection (with the pool: checked out) until its next request.
    finished: list[int] = []

    def on_finished(**kwargs: object) -> None:
        finished.append(threading.get_ident())

    signals.request_finished.connect(on_finished)
    closed.clear()
    try:
        with pytest.raises(RuntimeError, match="the stream broke"):
            _get("/stream-fails/" if kind == "sync" else "/astream-fails/")
    finally:
        signals.request_finished.disconnect(on_finished)
    assert closed == [kind]
    assert len(finished) == 1 and finished[0] != threading.get_ident()


def test_the_lifespan_protocol_is_answered_start_to_end():
    # uvicorn's default `--lifespan auto` logs "ASGI 'lifespan' protocol appears unsupported" when the app raises.
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict] = []

    async def receive() -> dict:
        return messages.pop(0)

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(asyncio.wait_for(application({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send), 5))
    assert sent == [{"type": "lifespan.startup.complete"}, {"type": "lifespan.shutdown.complete"}]
    assert messages == []
