"""The egress allowlist and its CONNECT proxy, in process (docs/sandbox.md#network).

Only loopback is ever connected to: a name that must not be connected to is
answered by a resolver given to the code under test, and the one test that
needs a public address spies on `socket.create_connection` so that nothing
leaves the machine.
"""

from __future__ import annotations

import contextlib
import socket
import threading

import pytest
from django.core.exceptions import ImproperlyConfigured

from tests.sandbox_support import Trap
from tools import egress
from tools.egress import EgressAllowlist, EgressRefused, egress_allowlist, open_upstream, parse_overrides
from tools.egress_proxy import MAX_TUNNELS, EgressProxy

FINNHUB = ("finnhub.io", 443)


def answering(*addresses: str):
    """A `getaddrinfo` stand-in answering `addresses`; it records the names asked."""
    asked: list[str] = []

    def resolve(host, port, **kwargs):
        asked.append(host)
        family = socket.AF_INET6 if ":" in addresses[0] else socket.AF_INET
        return [(family, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    resolve.asked = asked  # type: ignore[attr-defined]
    return resolve


def test_allowlist_from_settings(settings):
    settings.FINNHUB_API_KEY = ""
    settings.EXA_API_KEY = ""
    settings.EGRESS_UPSTREAM_OVERRIDES = ""
    assert egress_allowlist() == EgressAllowlist()
    assert not egress_allowlist()
    settings.FINNHUB_API_KEY = "fh"
    assert egress_allowlist().hosts == {FINNHUB}
    settings.EXA_API_KEY = "exa"
    settings.EXA_BASE_URL = "https://API.exa.ai/"
    assert egress_allowlist().hosts == {FINNHUB, ("api.exa.ai", 443)}
    # An override applies to an allowlisted entry only; it never adds a host.
    settings.EGRESS_UPSTREAM_OVERRIDES = "finnhub.io:443=127.0.0.1:8443, evil.example:443=127.0.0.1:9"
    assert egress_allowlist().overrides == {FINNHUB: ("127.0.0.1", 8443)}
    settings.EGRESS_UPSTREAM_OVERRIDES = "finnhub.io=127.0.0.1:8443"
    with pytest.raises(ImproperlyConfigured, match=r"'finnhub\.io' is not host:port"):
        egress_allowlist()


def test_parse_overrides():
    assert parse_overrides("") == {}
    assert parse_overrides("Finnhub.io:443=[::1]:8443") == {FINNHUB: ("::1", 8443)}
    with pytest.raises(ValueError, match="is not host:port=ip:port"):
        parse_overrides("finnhub.io:443")


def test_a_host_off_the_allowlist_is_refused_before_any_lookup():
    resolve = answering("127.0.0.1")
    allowlist = EgressAllowlist(hosts=frozenset({FINNHUB}))
    for host, port in [("evil.example", 443), ("finnhub.io", 80), ("127.0.0.1", 443), ("api.finnhub.io", 443)]:
        with pytest.raises(EgressRefused, match="not on the egress allowlist"):
            open_upstream(allowlist, host, port, timeout=1, resolve=resolve)
    assert resolve.asked == []
    assert allowlist.allows("FinnHub.IO", 443)


@pytest.mark.parametrize(
    "answer",
    [
        ["127.0.0.1"],
        ["10.1.2.3"],
        ["192.168.0.10"],
        ["169.254.169.254"],  # a cloud metadata service
        ["100.64.0.1"],
        ["0.0.0.0"],
        ["::1"],
        ["::ffff:127.0.0.1"],
        ["fd00::1"],
        ["fe80::1%1"],
        ["8.8.8.8", "127.0.0.1"],  # a rebinding answer mixing a public and a private address
    ],
)
def test_a_name_resolving_to_a_private_address_is_refused_connecting_nowhere(answer, monkeypatch):
    connects: list[object] = []
    monkeypatch.setattr(egress.socket, "create_connection", lambda *a, **k: connects.append(a))
    resolve = answering(*answer)
    allowlist = EgressAllowlist(hosts=frozenset({FINNHUB}))
    with pytest.raises(EgressRefused, match="private or reserved address"):
        open_upstream(allowlist, "finnhub.io", 443, timeout=1, resolve=resolve)
    assert resolve.asked == ["finnhub.io"]
    assert connects == []


def test_the_name_is_resolved_once_and_the_checked_address_is_what_is_connected(monkeypatch):
    # A spy stands for the network: nothing leaves the machine.
    connects: list[tuple[str, int]] = []

    def refuse(address, timeout=None):
        connects.append(address)
        raise ConnectionRefusedError

    monkeypatch.setattr(egress.socket, "create_connection", refuse)
    resolve = answering("8.8.8.8", "8.8.4.4")
    with pytest.raises(EgressRefused, match="did not accept a connection"):
        open_upstream(EgressAllowlist(hosts=frozenset({FINNHUB})), "finnhub.io", 443, timeout=1, resolve=resolve)
    assert resolve.asked == ["finnhub.io"]
    assert connects == [("8.8.8.8", 443), ("8.8.4.4", 443)]  # literals, never the name again


def test_a_name_that_does_not_resolve_is_refused():
    def fail(*args, **kwargs):
        raise socket.gaierror("no such name")

    with pytest.raises(EgressRefused, match="did not resolve"):
        open_upstream(EgressAllowlist(hosts=frozenset({FINNHUB})), "finnhub.io", 443, timeout=1, resolve=fail)


class Echo:
    """A loopback TCP server echoing what it receives, one thread per connection."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def stop(self) -> None:
        self.sock.close()


@pytest.fixture
def echo():
    server = Echo()
    yield server
    server.stop()


@pytest.fixture
def proxy_for(tmp_path):
    proxies: list[EgressProxy] = []

    def start(allowlist: EgressAllowlist) -> EgressProxy:
        proxy = EgressProxy(allowlist, str(tmp_path / f"egress{len(proxies)}.sock")).__enter__()
        proxies.append(proxy)
        return proxy

    yield start
    for proxy in proxies:
        proxy.stop()


def connect(proxy: EgressProxy, request: bytes) -> tuple[socket.socket, bytes]:
    client = socket.socket(socket.AF_UNIX)
    client.settimeout(5)
    client.connect(proxy.path)
    # A refusal sent on accept (503) may close the socket before the request is written.
    with contextlib.suppress(BrokenPipeError):
        client.sendall(request)
    head = b""
    while b"\r\n\r\n" not in head:
        data = client.recv(1)
        if not data:
            break
        head += data
    return client, head


def test_connect_to_an_allowed_host_tunnels_bytes_both_ways(proxy_for, echo):
    proxy = proxy_for(EgressAllowlist(hosts=frozenset({FINNHUB}), overrides={FINNHUB: ("127.0.0.1", echo.port)}))
    # Bytes sent right behind the request (a TLS hello, eagerly) reach the upstream too.
    client, head = connect(proxy, b"CONNECT finnhub.io:443 HTTP/1.1\r\nHost: finnhub.io:443\r\n\r\nearly ")
    assert head == b"HTTP/1.1 200 Connection established\r\n\r\n"
    client.sendall(b"bytes")
    received = b""
    while len(received) < len(b"early bytes"):
        received += client.recv(100)
    assert received == b"early bytes"
    assert (proxy.counts.tunnels, proxy.counts.refused, echo.accepted) == (1, 0, 1)
    # stop() ends the tunnel: the client reads the end of the stream.
    proxy.stop()
    assert client.recv(100) == b""
    client.close()


def test_refusals_name_the_reason_and_connect_nowhere(proxy_for, echo):
    proxy = proxy_for(EgressAllowlist(hosts=frozenset({FINNHUB}), overrides={FINNHUB: ("127.0.0.1", echo.port)}))
    cases = {
        b"CONNECT evil.example:443 HTTP/1.1\r\nHost: finnhub.io\r\n\r\n": b"403 Forbidden",
        b"CONNECT finnhub.io HTTP/1.1\r\nHost: finnhub.io\r\n\r\n": b"403 Forbidden",
        b"CONNECT https://finnhub.io:443/ HTTP/1.1\r\nHost: finnhub.io\r\n\r\n": b"403 Forbidden",
        b"CONNECT user@finnhub.io:443 HTTP/1.1\r\nHost: finnhub.io\r\n\r\n": b"403 Forbidden",
        b"GET https://finnhub.io/api/v1/quote HTTP/1.1\r\nHost: finnhub.io\r\n\r\n": b"405 Method Not Allowed",
        b"CONNECT finnhub.io:443 HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 10_000 + b"\r\n\r\n": b"400 Bad Request",
    }
    for request, status in cases.items():
        client, head = connect(proxy, request)
        client.close()
        assert head.split(b"\r\n")[0] == b"HTTP/1.1 " + status, request[:60]
    assert (proxy.counts.tunnels, proxy.counts.refused, echo.accepted) == (0, len(cases), 0)


def test_a_private_address_answer_is_a_502(tmp_path):
    allowlist = EgressAllowlist(hosts=frozenset({FINNHUB}))
    with EgressProxy(allowlist, str(tmp_path / "p.sock"), resolve=answering("127.0.0.1")) as proxy:
        client, head = connect(proxy, b"CONNECT finnhub.io:443 HTTP/1.1\r\nHost: finnhub.io\r\n\r\n")
        client.close()
    assert head.startswith(b"HTTP/1.1 502 Bad Gateway\r\n")


def test_tunnels_past_the_limit_are_refused(proxy_for, echo):
    proxy = proxy_for(EgressAllowlist(hosts=frozenset({FINNHUB}), overrides={FINNHUB: ("127.0.0.1", echo.port)}))
    request = b"CONNECT finnhub.io:443 HTTP/1.1\r\nHost: finnhub.io\r\n\r\n"
    opened = [connect(proxy, request) for _ in range(MAX_TUNNELS)]
    assert {head for _, head in opened} == {b"HTTP/1.1 200 Connection established\r\n\r\n"}
    client, head = connect(proxy, request)
    assert head.startswith(b"HTTP/1.1 503 ")
    for sock in [client, *(c for c, _ in opened)]:
        sock.close()


def test_the_socket_is_removed_when_the_proxy_stops(tmp_path):
    path = tmp_path / "p.sock"
    with EgressProxy(EgressAllowlist(hosts=frozenset({FINNHUB})), str(path)):
        assert path.is_socket()
    assert not path.exists()


def test_trap_counts_connections():
    # The listener the other tests use to prove that nothing connected.
    trap = Trap()
    socket.create_connection(("127.0.0.1", trap.port), timeout=2).close()
    deadline = threading.Event()
    for _ in range(50):
        if trap.accepted:
            break
        deadline.wait(0.02)
    trap.stop()
    assert trap.accepted == 1
