"""A CONNECT-only forwarding proxy on a Unix socket, one per `execute_python` call (docs/sandbox.md#network).

The sandbox has no network of its own; this socket, bound into it, is its
only way out. Each connection sends one `CONNECT host:port` request (parsed
by h11); the proxy answers:

- `403` when `host:port` is not on the allowlist: before any DNS lookup or
  connection (`tools.egress.open_upstream` refuses first);
- `405` for any other method: plain-HTTP forwarding is not offered, so the
  proxy never reads, rewrites or trusts a request's `Host` header or URL,
  and a key is never sent in clear text;
- `502` when the name resolves to a private or reserved address or the host
  does not answer;
- `200`, then bytes both ways, opaque (TLS end to end), until either side
  closes, the byte budget is spent, or the call ends (`stop()` closes every
  socket).

Why our own: the rules are the product's (resolve once and connect to the
checked address, refuse before connecting, a per-call lifetime); proxy.py,
tinyproxy or squid would need as much configuration and plugin code to say
the same, as a long-running daemon with a larger surface (plain-HTTP
forwarding, caching). The HTTP parsing, the risky part, is h11's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import threading
from dataclasses import dataclass

import h11

from tools.egress import EgressAllowlist, EgressRefused, Resolver, open_upstream

__all__ = ["EgressProxy", "ProxyCounts"]

logger = logging.getLogger(__name__)

#: The longest request head accepted (request line and headers).
MAX_HEAD_BYTES = 8192
#: Bytes one tunnel may carry, both ways together.
MAX_TUNNEL_BYTES = 32 * 1024 * 1024
#: Tunnels open at once; more are refused with 503.
MAX_TUNNELS = 8
HEAD_TIMEOUT_SECONDS = 10.0
CONNECT_TIMEOUT_SECONDS = 10.0


@dataclass
class ProxyCounts:
    """What one proxy did: tunnels opened, and requests refused before any connection or after a check."""

    tunnels: int = 0
    refused: int = 0


class EgressProxy:
    """Serve `allowlist` on a new Unix socket at `path` until `stop()` (or the `with` block ends).

    `socket_owner`: a uid to give the socket to (the sandbox's, when it
    differs from ours). `resolve`: the DNS lookup (`socket.getaddrinfo`).
    """

    def __init__(
        self,
        allowlist: EgressAllowlist,
        path: str,
        *,
        socket_owner: int | None = None,
        resolve: Resolver = socket.getaddrinfo,
    ) -> None:
        self.allowlist = allowlist
        self.path = path
        self.resolve = resolve
        self.counts = ProxyCounts()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(path)
        if socket_owner is not None:
            os.chown(path, socket_owner, socket_owner)
        os.chmod(path, 0o600)
        self._server.listen(MAX_TUNNELS)
        self._acceptor = threading.Thread(target=self._accept, name="egress-proxy", daemon=True)

    def __enter__(self) -> EgressProxy:
        self._acceptor.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Close the listener and every open tunnel; wait (briefly) for the threads."""
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        for thread in [self._acceptor, *self._threads]:
            if thread.is_alive():
                thread.join(2.0)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(client,), name="egress-tunnel", daemon=True)
            with self._lock:
                self._threads = [t for t in self._threads if t.is_alive()]
                busy = len(self._threads) >= MAX_TUNNELS
                if not busy:
                    self._threads.append(thread)
                    self._open.add(client)
            if busy:
                _answer(client, 503, "too many connections")
                client.close()
            else:
                thread.start()

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
            try:
                request = _read_request(client, conn)
            except h11.RemoteProtocolError:
                self._refuse(client, 400, "not an HTTP request")
                return
            if request is None:
                return
            if request.method != b"CONNECT":
                self._refuse(client, 405, "only CONNECT (HTTPS) is offered")
                return
            host, port = _target(request.target)
            if host is None or not self.allowlist.allows(host, port):
                # Refused before any lookup or connection.
                self._refuse(client, 403, "the host is not on the egress allowlist")
                return
            try:
                upstream = open_upstream(
                    self.allowlist, host, port, timeout=CONNECT_TIMEOUT_SECONDS, resolve=self.resolve
                )
            except EgressRefused as refused:
                self._refuse(client, 502, refused.reason)
                return
            with self._lock:
                if self._stopped.is_set():
                    return
                self._open.add(upstream)
                self.counts.tunnels += 1
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            early = conn.trailing_data[0]
            if early:
                upstream.sendall(early)
            _pump(client, upstream, self._stopped)
        except OSError:
            return
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    with self._lock:
                        self._open.discard(sock)
                    sock.close()

    def _refuse(self, client: socket.socket, status: int, reason: str) -> None:
        with self._lock:
            self.counts.refused += 1
        # The host asked for is not logged: the model chose it, and it may carry user data.
        logger.info("egress proxy: refused a request (%s, HTTP %d)", reason, status)
        _answer(client, status, reason)


def _read_request(client: socket.socket, conn: h11.Connection) -> h11.Request | None:
    client.settimeout(HEAD_TIMEOUT_SECONDS)
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = client.recv(4096)
            conn.receive_data(data)
            if not data:
                return None
            continue
        client.settimeout(None)
        return event if isinstance(event, h11.Request) else None


def _target(target: bytes) -> tuple[str | None, int]:
    """`b"finnhub.io:443"` -> `("finnhub.io", 443)`; `(None, 0)` for anything else (a URL, no port)."""
    text = target.decode("ascii", errors="replace")
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host or "/" in host or "@" in host:
        return None, 0
    return host, int(port)


_STATUS_TEXT = {400: "Bad Request", 403: "Forbidden", 405: "Method Not Allowed", 502: "Bad Gateway", 503: "Busy"}


def _answer(client: socket.socket, status: int, reason: str) -> None:
    body = (reason + "\n").encode()
    head = (
        f"HTTP/1.1 {status} {_STATUS_TEXT[status]}\r\ncontent-type: text/plain\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        client.sendall(head.encode() + body)


def _pump(client: socket.socket, upstream: socket.socket, stopped: threading.Event) -> None:
    peers = {client: upstream, upstream: client}
    carried = 0
    while not stopped.is_set() and carried < MAX_TUNNEL_BYTES:
        readable, _, _ = select.select(list(peers), [], [], 1.0)
        for sock in readable:
            data = sock.recv(65536)
            if not data:
                return
            peers[sock].sendall(data)
            carried += len(data)
