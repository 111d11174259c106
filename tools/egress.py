"""The egress allowlist: the hosts tool code may reach, and the one function that connects (docs/sandbox.md#network).

`egress_allowlist()` reads it from settings: `finnhub.io:443` when
`FINNHUB_API_KEY` is set, the host of `EXA_BASE_URL` when `EXA_API_KEY` is
set, nothing else. `open_upstream(allowlist, host, port)` is the single place
a connection for tool code is made:

1. the host and port must be on the allowlist exactly (a DNS name, compared
   lower-cased; an IP literal never is); otherwise `EgressRefused` is raised
   before any lookup or connection;
2. the name is resolved once, here; every address must be public
   (`ipaddress.is_global`), else it is refused (a rebound or hijacked name
   pointing at 127.0.0.1, 10.x, 169.254.169.254, ... reaches nothing);
3. the socket connects to an address that was checked, never to the name
   again, so what was checked is what is used (no time-of-check gap).

`EGRESS_UPSTREAM_OVERRIDES` (tests, staging) maps an allowlisted `host:port`
to a fixed `ip:port`, skipping DNS and the public-address rule for that entry
only; it never adds a host to the allowlist.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

__all__ = [
    "FINNHUB_HOST",
    "EgressAllowlist",
    "EgressRefused",
    "checked_addresses",
    "egress_allowlist",
    "open_upstream",
    "parse_overrides",
    "url_host",
]

#: Finnhub's API (https://finnhub.io/api/v1/...).
FINNHUB_HOST = ("finnhub.io", 443)

Resolver = Callable[..., list[tuple[Any, ...]]]


class EgressRefused(Exception):
    """A connection the allowlist does not allow; `reason` is short and names no host (it may be user data)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class EgressAllowlist:
    """`hosts`: allowed `(lower-case DNS name, port)` pairs. `overrides`: `(host, port) -> (ip, port)`
    for allowlisted entries only (tests)."""

    hosts: frozenset[tuple[str, int]] = frozenset()
    overrides: Mapping[tuple[str, int], tuple[str, int]] = field(default_factory=dict)

    def allows(self, host: str, port: int) -> bool:
        """Whether `host:port` is on the allowlist (exact name, case-insensitive; no IP literal)."""
        return (host.lower(), port) in self.hosts

    def __bool__(self) -> bool:
        return bool(self.hosts)


def open_upstream(
    allowlist: EgressAllowlist, host: str, port: int, *, timeout: float, resolve: Resolver = socket.getaddrinfo
) -> socket.socket:
    """A TCP socket connected to `host:port`, checked as the module says; raises `EgressRefused`.

    `resolve` is `socket.getaddrinfo` (a test passes a resolver that answers
    a private address). Connect errors are `EgressRefused` too.
    """
    for address in checked_addresses(allowlist, host, port, resolve=resolve):
        try:
            return socket.create_connection(address, timeout=timeout)
        except OSError:
            continue
    raise EgressRefused("the host did not accept a connection")


def checked_addresses(
    allowlist: EgressAllowlist, host: str, port: int, *, resolve: Resolver = socket.getaddrinfo
) -> list[tuple[str, int]]:
    """Steps 1 and 2 of the module: the `(ip, port)` pairs `host:port` may be reached at; raises `EgressRefused`."""
    if not allowlist.allows(host, port):
        raise EgressRefused("the host is not on the egress allowlist")
    override = allowlist.overrides.get((host.lower(), port))
    if override is not None:
        return [override]
    try:
        answers = resolve(host, port, type=socket.SOCK_STREAM)
    except OSError:
        raise EgressRefused("the host name did not resolve") from None
    addresses = [(str(a[4][0]), port) for a in answers]
    if not addresses or not all(_is_public(address) for address, _ in addresses):
        raise EgressRefused("the host name resolved to a private or reserved address")
    return addresses


def _is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def parse_overrides(value: str) -> dict[tuple[str, int], tuple[str, int]]:
    """`"finnhub.io:443=127.0.0.1:8443,..."` -> `{("finnhub.io", 443): ("127.0.0.1", 8443)}`; raises ValueError."""
    overrides: dict[tuple[str, int], tuple[str, int]] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, sep, target = item.partition("=")
        if not sep:
            raise ValueError(f"EGRESS_UPSTREAM_OVERRIDES: {item!r} is not host:port=ip:port")
        overrides[_host_port(name.strip().lower())] = _host_port(target.strip())
    return overrides


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"EGRESS_UPSTREAM_OVERRIDES: {text!r} is not host:port")
    return host.strip("[]"), int(port)


def url_host(url: str) -> tuple[str, int] | None:
    """`https://API.exa.ai/x` -> `("api.exa.ai", 443)`; None for a URL that is not http(s) or has no host."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return parts.hostname.lower(), port


def egress_allowlist() -> EgressAllowlist:
    """The allowlist from settings (see the module); raises `ImproperlyConfigured` for bad overrides."""
    hosts: set[tuple[str, int]] = set()
    if (getattr(settings, "FINNHUB_API_KEY", "") or "").strip():
        hosts.add(FINNHUB_HOST)
    if (getattr(settings, "EXA_API_KEY", "") or "").strip():
        exa = url_host(getattr(settings, "EXA_BASE_URL", ""))
        if exa is not None:
            hosts.add(exa)
    try:
        overrides = parse_overrides(getattr(settings, "EGRESS_UPSTREAM_OVERRIDES", "") or "")
    except ValueError as error:
        raise ImproperlyConfigured(str(error)) from None
    return EgressAllowlist(
        hosts=frozenset(hosts), overrides={key: value for key, value in overrides.items() if key in hosts}
    )
