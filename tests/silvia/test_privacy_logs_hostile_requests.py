"""No account id reaches the log output of the Procfile's web (gunicorn) and stream (uvicorn) processes at
DEBUG level, however the request that carries it is malformed (docs/privacy.md, docs/deploying.md#logging).

Raw requests over a socket: the request target in absolute form (`GET http://host/accounts/<id>?q=<id>`,
legal HTTP/1.1, which gunicorn logs as it got it and uvicorn's httptools parser as its path), an id in the
`Host` header (Django's
`DisallowedHost` message quotes it), and requests gunicorn's parser refuses (its `Invalid request from
ip=…` warning quotes the bad header, transfer coding or chunk size). Each still leaves its line, redacted.
"""

from __future__ import annotations

import socket
import time

import pytest

from tests.live_support import database_url
from tests.procfile import Stack, embedded_env

pytestmark = pytest.mark.django_db(transaction=True)

ACCOUNT = "u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dK"

REQUESTS = [
    f"GET http://127.0.0.1/accounts/{ACCOUNT}?q={ACCOUNT} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    f"GET https://{ACCOUNT}.example/admin/chat/chatlog/?q={ACCOUNT} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    f"GET /api/chat/sessions/ HTTP/1.1\r\nHost: {ACCOUNT}\r\n\r\n",
    f"GET /api/chat/sessions/ HTTP/1.1\r\nHost: 127.0.0.1:{ACCOUNT}\r\n\r\n",
    f"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n{ACCOUNT}\r\n\r\n",
    f"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-{ACCOUNT} : v\r\n\r\n",
    f"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: {ACCOUNT}\r\n\r\n",
    f"POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n{ACCOUNT}\r\n",
]


def _send(port: int, request: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request.encode())
        return sock.recv(64).split(b"\r\n")[0]


def _all_written(logs: str) -> bool:
    """Whether the stack has logged what it logs for the requests above, redacted (access lines come after
    the responses)."""
    return (
        logs.count("django.security.DisallowedHost") >= 4
        and "WARNING gunicorn.error: Invalid request from ip=127.0.0.1" in logs
        and 'gunicorn.access: 127.0.0.1 "GET …/accounts/…?… HTTP/1.1"' in logs
        and "uvicorn.access: 127.0.0.1:" in logs
        and '"GET /accounts/…?… HTTP/1.1" 302' in logs  # uvicorn's: the absolute form's path
    )


def test_malformed_requests_leave_no_account_id_in_any_log(tmp_path):
    stack = Stack(
        {"DATABASE_URL": database_url(), "DJANGO_LOG_LEVEL": "DEBUG", **embedded_env(tmp_path / "broker")}, tmp_path
    )
    try:
        servers = [stack.web(), stack.stream()]
        for server in servers:
            for request in REQUESTS:
                assert _send(server.port, request).startswith(b"HTTP/1.1 "), request
        deadline = time.monotonic() + 15
        while not _all_written(stack.logs()) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stack.close()
    logs = stack.logs()  # whole: the processes have exited
    at = logs.find(ACCOUNT)
    assert at < 0, f"an account id was logged: …{logs[max(0, at - 300) : at + 80]}…"
    assert _all_written(logs)  # the lines are still there, redacted
    # A bad Host is one WARNING line, no ERROR and no traceback (issue 38).
    assert logs.count("WARNING django.security.DisallowedHost: (message withheld") == logs.count("DisallowedHost")
    assert "Traceback" not in logs
