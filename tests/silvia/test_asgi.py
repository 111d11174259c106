"""`silvia.asgi`: Django's stock ASGI handler inside `BodyLimit` (docs/api.md#errors, docs/deploying.md).

A body past the limit is a 413 that closes the connection (silvia.asgi.BodyLimit, docs/api.md#errors).

The Procfile's `stream:` process, a real socket. After a response, uvicorn reads and drops whatever
body the client still sends, and every byte that arrives puts off its keep-alive timeout: a 413 that
left the connection open let one client keep a stream process parsing gigabytes for as long as it
liked (a declared `Content-Length` of 10^12, or endless chunks), on the event loop every stream shares.
Before it closes, it reads and drops up to `BodyLimit.linger_bytes` more for up to `linger_seconds` (a
lingering close): a client that sends its whole body before it reads gets the 413, not a reset."""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import socket
import time
import uuid

import pytest
from django.core.handlers.asgi import ASGIHandler

from live.admission import AdmissionGate
from live.direct import DirectOpens
from live.handoff import StreamHandoff
from live.slots import GiveBackSlots
from silvia.asgi import BodyLimit, application, django_application
from tests.live_support import database_url
from tests.procfile import Stack, embedded_env
from tests.silvia.test_wsgi import heap_after_import

pytestmark = pytest.mark.django_db(transaction=True)

TURNS = "/api/chat/sessions/3f0e8b0c-2d5c-4a57-9a51-0d6c5e2b9a11/turns/"


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


def _token_headers(token_client) -> list[tuple[bytes, bytes]]:
    token = token_client._credentials["HTTP_AUTHORIZATION"].encode()
    return [(b"authorization", token), (b"content-type", b"application/json")]


def test_the_application_is_djangos_stock_handler_inside_the_body_limit_and_the_admission_gate():
    assert type(django_application) is ASGIHandler
    assert isinstance(application, BodyLimit) and isinstance(application.app, AdmissionGate)
    assert isinstance(application.app.app, GiveBackSlots) and isinstance(application.app.app.app, DirectOpens)
    assert isinstance(application.app.app.app.app, StreamHandoff)
    assert application.app.app.app.app.app is django_application


def test_the_api_answers_through_it(token_client):
    status, _, body = _request("GET", "/api/chat/sessions/", _token_headers(token_client))
    assert (status, body) == (200, b'{"count":0,"next":null,"previous":null,"results":[]}')
    assert _request("GET", "/api/chat/sessions/")[0] == 401


def test_a_body_without_content_length_is_parsed(token_client):
    # A chunked body (no Content-Length) would reach DRF as no body at all: "message: This field is required."
    chunks = [b'{"mess', b'age": 12}']
    status, _, body = _request("POST", TURNS, _token_headers(token_client), chunks)
    assert (status, json.loads(body)) == (400, {"message": ["Expected a string."]})


def test_a_body_past_the_limit_is_a_413_before_it_ends(token_client, settings, monkeypatch):
    # The client is still sending (no last chunk): the body is refused at the limit, not spooled to its end.
    monkeypatch.setattr(application, "limit", 1000)
    chunks = [b'{"message": "', b"x" * 600, b"x" * 600]
    status, headers, body = _request("POST", TURNS, _token_headers(token_client), chunks, body_ends=False, timeout=10)
    assert (status, headers[b"content-type"]) == (413, b"application/json")
    assert json.loads(body) == {"detail": "The request body is larger than 1000 bytes."}


def test_a_declared_length_past_the_limit_is_a_413_unread(token_client, monkeypatch):
    monkeypatch.setattr(application, "limit", 1000)
    headers = [*_token_headers(token_client), (b"content-length", b"5000")]
    status, _, body = _request("POST", TURNS, headers, [b"x" * 10], body_ends=False, timeout=10)
    assert (status, json.loads(body)) == (413, {"detail": "The request body is larger than 1000 bytes."})


def test_a_body_past_the_limit_elsewhere_is_a_plain_413(monkeypatch):
    monkeypatch.setattr(application, "limit", 1000)
    form = [(b"content-type", b"application/x-www-form-urlencoded")]
    status, headers, body = _request("POST", "/login/", form, [b"u=" + b"x" * 2000], body_ends=False, timeout=10)
    assert (status, headers[b"content-type"], body) == (
        413,
        b"text/plain; charset=utf-8",
        b"The request body is larger than 1000 bytes.\n",
    )


def test_a_body_at_the_limit_is_read(token_client, monkeypatch):
    body = json.dumps({"message": 12}).encode()
    monkeypatch.setattr(application, "limit", len(body))
    status, _, answer = _request("POST", TURNS, _token_headers(token_client), [body[:5], body[5:]])
    assert (status, json.loads(answer)) == (400, {"message": ["Expected a string."]})


def test_the_limit_is_djangos_setting():
    from django.conf import settings

    assert application.limit == settings.DATA_UPLOAD_MAX_MEMORY_SIZE


@pytest.fixture
def stream(tmp_path):
    stack = Stack({"DATABASE_URL": database_url(), **embedded_env(tmp_path / "broker")}, tmp_path)
    yield stack.stream()
    stack.close()


def _status_line(sock: socket.socket) -> bytes:
    head = b""
    while b"\r\n" not in head:
        chunk = sock.recv(256)
        assert chunk, "closed before any answer"
        head += chunk
    return head.split(b"\r\n")[0]


@pytest.mark.parametrize(
    ("framing", "piece"),
    [
        ("Content-Length: 1000000000000", b"a" * 65536),
        ("Transfer-Encoding: chunked", b"10000\r\n" + b"a" * 65536 + b"\r\n"),
    ],
)
def test_a_413_closes_the_connection_however_long_the_body(stream, framing, piece):
    sock = socket.create_connection(("127.0.0.1", stream.port), timeout=10)
    path = f"/api/chat/sessions/{uuid.uuid4()}/turns/"
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{framing}\r\nContent-Type: application/json\r\n\r\n"
    sock.sendall(head.encode())
    status, after, ended = None, 0, None
    deadline = time.monotonic() + 5
    try:
        while time.monotonic() < deadline:
            sock.sendall(piece)
            if status is None:
                sock.setblocking(False)
                with contextlib.suppress(BlockingIOError):  # not answered yet
                    status = _status_line(sock)
                sock.setblocking(True)
            else:
                after += len(piece)
    except OSError as error:  # the server closed it: EPIPE or ECONNRESET
        ended = type(error).__name__
    finally:
        sock.close()
    assert status in (None, b"HTTP/1.1 413 Request Entity Too Large")  # None: reset before it was read
    assert ended in ("BrokenPipeError", "ConnectionResetError"), f"still open after {after >> 20} MiB past the 413"
    assert after < 64 << 20


def _read_response(sock: socket.socket) -> tuple[bytes, bytes]:
    reply = b""
    while b"\r\n\r\n" not in reply:
        chunk = sock.recv(65536)
        assert chunk, f"closed before the whole head: {reply!r}"
        reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed before the whole body"
        body += chunk
    return head, body


def test_a_client_that_sends_its_whole_20_mb_body_before_reading_gets_the_413(stream):
    body = b"a" * (20 << 20)
    with socket.create_connection(("127.0.0.1", stream.port), timeout=10) as sock:
        path = f"/api/chat/sessions/{uuid.uuid4()}/turns/"
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
            "Content-Type: application/json\r\n\r\n".encode()
        )
        # Send the body only once the 413 has arrived: without a lingering close the connection is gone.
        readable, _, _ = select.select([sock], [], [], 10)
        assert readable, "no answer to the headers within 10 s"
        sock.sendall(body)
        head, answer = _read_response(sock)
        assert sock.recv(1) == b""  # then closed
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 413 Request Entity Too Large"
    assert b"connection: close" in head.lower()
    assert answer == b'{"detail": "The request body is larger than 2621440 bytes."}'


def test_a_client_that_waits_for_100_continue_is_refused_without_sending_its_body(stream):
    with socket.create_connection(("127.0.0.1", stream.port), timeout=10) as sock:
        path = f"/api/chat/sessions/{uuid.uuid4()}/turns/"
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {20 << 20}\r\n"
            "Expect: 100-continue\r\nContent-Type: application/json\r\n\r\n".encode()
        )
        head, answer = _read_response(sock)  # no `100 Continue` before it
        assert sock.recv(1) == b""
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 413 Request Entity Too Large"
    assert answer == b'{"detail": "The request body is larger than 2621440 bytes."}'


def test_the_heap_loaded_at_start_is_left_out_of_the_collector():
    """docs/deploying.md#the-heap-a-process-starts-with, for the stream process."""
    heap = heap_after_import("silvia.asgi")
    assert heap["frozen"] > heap["before"] > 10_000
    assert heap["tracked"] < 100
