"""Real-HTTP helpers for the benchmarks: scratch databases, servers, a keep-alive client.

`scratch_postgres(server_url)` (from `bench._scratch`) creates a scratch
database and drops it, with its roles, at exit. `Server` runs one server
process, no access log: `Server(WEB, env)` the product as users reach it,
the Procfile's `web:` line (gunicorn on `silvia.wsgi`, one worker process,
`gunicorn.conf.py`'s threads); `Server("module:app", env)` an ASGI app on
uvicorn, one worker: the floor (`bench._floor_app:app`). Both are read by
the same client: `Client.get` reads a whole body over one kept-alive connection.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from bench._scratch import scratch_postgres

ROOT = Path(__file__).resolve().parent.parent
__all__ = ["ROOT", "WEB", "Client", "Server", "django_env", "scratch_postgres"]

#: The product's web process: the Procfile's `web:` line.
WEB = "web"


def django_env(database_url: str) -> dict[str, str]:
    """The environment of a product process on `database_url` (production-like: DEBUG off)."""
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        DJANGO_SETTINGS_MODULE="silvia.settings",
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY=env.get("DJANGO_SECRET_KEY", "bench-only-secret-key-not-for-production-0123456789"),
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        DJANGO_LOG_LEVEL="WARNING",
        # No access log, as the floor writes none (uvicorn's --no-access-log says the same).
        DJANGO_ACCESS_LOG="false",
        PYTHONPATH=str(ROOT),
    )
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One uvicorn process serving `app` on 127.0.0.1 (a context manager)."""

    def __init__(self, app: str, env: dict[str, str], root: Path = ROOT) -> None:
        """`root`: the checkout to serve (another one, e.g. main's, runs with its own `.venv`)."""
        self.app = app
        self.env = env
        self.root = root
        self.python = sys.executable if root == ROOT else str(root / ".venv" / "bin" / "python")
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Server:
        if self.app == WEB:
            # One worker process (WEB_CONCURRENCY), as uvicorn runs the floor; a long keep-alive: the other
            # server's big responses may take longer than the default between two requests of one client.
            command = [self.python, "-m", "gunicorn", "silvia.wsgi", "--bind", f"127.0.0.1:{self.port}"]
            command += ["--keep-alive", "600", "--log-level", "warning"]
            env = {**self.env, "WEB_CONCURRENCY": "1", "PYTHONPATH": str(self.root)}
        else:
            command = [self.python, "-m", "uvicorn", self.app, "--host", "127.0.0.1", "--port", str(self.port)]
            command += ["--no-access-log", "--log-level", "warning", "--workers", "1", "--timeout-keep-alive", "600"]
            env = self.env
        self.process = subprocess.Popen(command, cwd=self.root, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.app} exited with status {self.process.returncode}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return self
            time.sleep(0.1)
        raise RuntimeError(f"{self.app} did not start listening")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def peak_rss_mib(self) -> float:
        """The worker's peak resident memory so far (VmHWM), MiB."""
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmHWM")

    def client(self, headers: dict[str, str] | None = None) -> Client:
        return Client(self.port, headers or {})


class Client:
    """GETs over one kept-alive HTTP/1.1 connection; each call reads the whole body."""

    def __init__(self, port: int, headers: dict[str, str]) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        self.headers = headers

    def get(self, path: str, expect: int = 200, headers: dict[str, str] | None = None) -> bytes:
        self.connection.request("GET", path, headers={**self.headers, **(headers or {})})
        response = self.connection.getresponse()
        body = response.read()
        if response.status != expect:
            raise AssertionError(f"GET {path}: {response.status} {body[:300]!r}")
        self.last_headers = response.headers  # case-insensitive
        return body
