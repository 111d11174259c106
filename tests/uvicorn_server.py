"""A real uvicorn process serving `silvia.asgi:application`, as docs/deploying.md runs it."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Server:
    """A running server: its base URL and the file its stdout and stderr go to."""

    url: str
    log_path: Path
    process: subprocess.Popen[bytes]

    def output(self) -> str:
        """Everything the process printed so far (stdout and stderr together)."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def subprocess_database_url(tmp_path: Path) -> str:
    """A DATABASE_URL a child process can open holding what the test database holds now.

    PostgreSQL: the test database itself (use `transactional_db`, so rows are
    committed). SQLite: the in-memory test database copied to a file.
    """
    settings = connection.settings_dict
    if connection.vendor == "postgresql":
        user, host, port = settings["USER"] or "postgres", settings["HOST"] or "127.0.0.1", settings["PORT"] or 5432
        return f"postgres://{user}@{host}:{port}/{settings['NAME']}"
    connection.ensure_connection()
    target = tmp_path / "db.sqlite3"
    with sqlite3.connect(target) as copy:
        connection.connection.backup(copy)
    return f"sqlite:///{target}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def uvicorn_server(log_path: Path, env: dict[str, str], args: Sequence[str] = ()) -> Iterator[Server]:
    """Start `python -m uvicorn silvia.asgi:application [args]` with production settings and `env` on top.

    Waits until it accepts connections (at most 30 s); stops it at exit.
    Raises RuntimeError with the server's output when it does not start.
    """
    port = _free_port()
    full_env = {**os.environ, "DJANGO_SETTINGS_MODULE": "silvia.settings", **env}
    command = [sys.executable, "-m", "uvicorn", "silvia.asgi:application", "--host", "127.0.0.1", "--port", str(port)]
    command += args
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT)
    server = Server(url=f"http://127.0.0.1:{port}", log_path=log_path, process=process)
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"uvicorn exited with {process.returncode}:\n{server.output()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"uvicorn did not start in 30 s:\n{server.output()}") from None
                time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def raw_request(url: str, request: bytes) -> tuple[int, bytes]:
    """Send `request` (a whole HTTP/1.1 request, bytes as given) to the server at `url`.

    Returns (status code, raw response). Bytes go out unvalidated, as a fuzzer sends them.
    """
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    response = b"".join(chunks)
    return int(response.split(b" ", 2)[1]), response
