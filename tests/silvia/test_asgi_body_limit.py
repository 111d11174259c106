"""A body past the limit is a 413 that closes the connection (silvia.asgi.BodyLimit, docs/api.md#errors).

The Procfile's `stream:` process, a real socket. After a response, uvicorn reads and drops whatever
body the client still sends, and every byte that arrives puts off its keep-alive timeout: a 413 that
left the connection open let one client keep a stream process parsing gigabytes for as long as it
liked (a declared `Content-Length` of 10^12, or endless chunks), on the event loop every stream shares.
Before it closes, it reads and drops up to `BodyLimit.linger_bytes` more for up to `linger_seconds` (a
lingering close): a client that sends its whole body before it reads gets the 413, not a reset.
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
import uuid

import pytest

from tests.live_support import database_url
from tests.procfile import Stack, embedded_env

pytestmark = pytest.mark.django_db(transaction=True)


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
