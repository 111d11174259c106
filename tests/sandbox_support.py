"""Helpers for sandbox tests: the real sandbox, a TLS stand-in for Finnhub on loopback, a listener that
records who connected, processes found by a marker in their command line, and running code that prints
JSON (the sandbox's fixtures are tests/tools/conftest.py)."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import textwrap
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tools.python import ExecutePythonTool
from tools.sandbox import Sandbox, SandboxUnavailable, find_sandbox

MB = 1024 * 1024

#: A Finnhub quote, as https://finnhub.io/api/v1/quote answers it.
QUOTE = {"c": 189.5, "d": 1.25, "dp": 0.66, "h": 190.1, "l": 187.9, "o": 188.0, "pc": 188.25, "t": 1717000000}


def the_sandbox() -> Sandbox:
    """The sandbox on this machine; fails (never skips) when bubblewrap cannot run: CI installs it."""
    try:
        return find_sandbox(bwrap="bwrap", interpreter="", run_as_uid=65534)
    except SandboxUnavailable as unavailable:
        reason = unavailable.reason
        raise AssertionError(f"the sandbox must start here (apt-get install bubblewrap): {reason}") from None


def make_certificate(folder: Path, host: str) -> tuple[Path, Path]:
    """A self-signed certificate for `host` (openssl): (cert.pem, key.pem)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"),
            *("-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={host}"),
            *("-addext", f"subjectAltName=DNS:{host}"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


class FinnhubStandIn:
    """An HTTPS server on 127.0.0.1 answering `GET /api/v1/quote?symbol=...&token=...` with `QUOTE`.

    `requests` records `(path, symbol, token)` of each request it served.
    """

    def __init__(self, cert: Path, key: Path) -> None:
        self.requests: list[tuple[str, str | None, str | None]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(url.query)
                stand_in.requests.append((url.path, query.get("symbol", [None])[0], query.get("token", [None])[0]))
                body = json.dumps(QUOTE).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Trap:
    """A TCP listener on 127.0.0.1 (a given port, or a free one) that counts the connections it accepts."""

    def __init__(self, port: int = 0) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.peer_ports: list[int] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except OSError:
                continue
            self.peer_ports.append(peer[1])
            self.accepted += 1
            conn.close()

    def accepted_before_now(self, timeout: float = 10) -> int:
        """How many connections were accepted before this call. A connection of our own is made and waited
        for: the listen queue is first in, first out, so any connection made before it is accepted before it
        (no waiting to see that nothing comes)."""
        with socket.socket() as ours:  # no name lookup (a test may be counting them)
            ours.settimeout(timeout)
            ours.connect(("127.0.0.1", self.port))
            port = ours.getsockname()[1]
            deadline = time.monotonic() + timeout
            while port not in self.peer_ports:
                assert time.monotonic() < deadline, "the trap did not accept our own connection"
                time.sleep(0.01)
        return self.peer_ports.index(port)

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(2)
        self.sock.close()


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line holds `marker` (zombies excluded)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


def run(tool: ExecutePythonTool, code: str) -> dict:
    """Run `code`, which prints one JSON document; that document."""
    output = tool.run({"code": textwrap.dedent(code)}, user=None)
    return json.loads(output["stdout"])
