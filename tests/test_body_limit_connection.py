"""A body past the limit is a 413 that closes the connection (silvia.asgi.BodyLimit, docs/api.md#errors).

The Procfile's `stream:` process, a real socket. After a response, uvicorn reads and drops whatever
body the client still sends, and every byte that arrives puts off its keep-alive timeout: a 413 that
left the connection open let one client keep a stream process parsing gigabytes for as long as it
liked (a declared `Content-Length` of 10^12, or endless chunks), on the event loop every stream shares.
"""

from __future__ import annotations

import contextlib
import socket
import time
import uuid

import pytest

from tests.live_support import database_url
from tests.procfile import Stack, filesystem_env

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def stream(tmp_path):
    stack = Stack({"DATABASE_URL": database_url(), **filesystem_env(tmp_path / "broker")}, tmp_path)
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
