"""A client that leaves before its stream's headers gives its stream slot back (docs/live.md#admission).

The Procfile's `stream:` process (uvicorn, Django's ASGI handler), a real socket: the client sends
`GET …/events/` and closes at once, while the view is still running in its thread. Django's handler
then cancels the request and drops the response the view returns, so the response is never closed:
a slot taken by the view must still be given back, or a user who reconnects in a hurry (a flaky
network, a page reloaded) is locked out of streams in that process (429) until it restarts.
"""

from __future__ import annotations

import socket
import time

import pytest
from rest_framework.authtoken.models import Token

from live.models import LiveTurn, LiveTurnEvent
from tests.live_support import database_url, running_turn
from tests.procfile import Stack, embedded_env

pytestmark = pytest.mark.django_db(transaction=True)

CAP = 3


def _request(turn: LiveTurn, token: str) -> bytes:
    return (
        f"GET /api/chat/turns/{turn.id}/events/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Token {token}\r\nLast-Event-ID: 0\r\n\r\n"
    ).encode()


def _status(sock: socket.socket) -> int:
    head = b""
    while b"\r\n" not in head:
        chunk = sock.recv(256)
        assert chunk, "the server closed the connection before answering"
        head += chunk
    return int(head.split()[1])


@pytest.fixture
def stream(tmp_path):
    stack = Stack({"DATABASE_URL": database_url(), **embedded_env(tmp_path / "broker")}, tmp_path)
    yield stack.stream(LIVE_SSE_MAX_STREAMS_PER_USER=str(CAP))
    stack.close()


def test_clients_that_leave_before_the_headers_leave_every_slot_free(stream, maya):
    token = Token.objects.create(user=maya).key
    turn = running_turn(maya)
    request = _request(turn, token)
    for _ in range(60):
        with socket.create_connection(("127.0.0.1", stream.port)) as sock:
            sock.sendall(request)  # and leave at once: the view is still running
    assert _the_cap_once_settled(request, stream.port) == [200] * CAP + [429]


def test_clients_that_leave_mid_replay_or_mid_follow_leave_every_slot_free(stream, maya):
    token = Token.objects.create(user=maya).key
    running = running_turn(maya)
    long_log = running_turn(maya)  # 2,500 events: a replay of three pages, about 0.3 MB
    LiveTurnEvent.objects.bulk_create(
        LiveTurnEvent(turn=long_log, seq=seq, event="text", data='{"text":"%s"}' % ("x" * 100))
        for seq in range(2, 2502)
    )
    LiveTurn.objects.filter(pk=long_log.pk).update(last_seq=2501)
    for i in range(30):
        turn = long_log if i % 2 else running  # mid-replay, or mid-follow (after the log's one event)
        with socket.create_connection(("127.0.0.1", stream.port), timeout=10) as sock:
            sock.sendall(_request(turn, token))
            read, wanted = 0, (1000 + 10000 * i) if turn is long_log else 1
            while read < wanted and (chunk := sock.recv(4096)):
                read += len(chunk)
    assert _the_cap_once_settled(_request(running, token), stream.port) == [200] * CAP + [429]


def _the_cap_once_settled(request: bytes, port: int) -> list[int]:
    """The statuses of `CAP + 1` streams opened one after another, retried for up to 15 s: the server may
    still be running the views of the clients that left."""
    deadline, statuses = time.monotonic() + 15, _open_streams(request, port, CAP + 1)
    while statuses != [200] * CAP + [429] and time.monotonic() < deadline:
        time.sleep(0.5)
        statuses = _open_streams(request, port, CAP + 1)
    return statuses


def _open_streams(request: bytes, port: int, count: int) -> list[int]:
    """Open `count` streams one after another, their statuses; then close them all."""
    held: list[socket.socket] = []
    statuses: list[int] = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            held.append(sock)
            sock.sendall(request)
            statuses.append(_status(sock))  # a 200 stays open: it holds its slot
        return statuses
    finally:
        for sock in held:
            sock.close()
