"""An httpx transport whose every connection goes through the egress allowlist (docs/sandbox.md#network).

`search_web`'s requests to Exa use it, so the service's own fetches obey the
same allowlist as the sandbox's proxy: `tools.egress.checked_addresses`
checks the host, resolves it once and refuses a private address; the
connection is then made to that checked address (TLS still verifies the
host name). httpcore, httpx's engine, takes the connecting part as a
network backend.
"""

from __future__ import annotations

from collections.abc import Iterable

import httpcore
import httpx

from tools.egress import EgressAllowlist, checked_addresses

__all__ = ["allowlist_transport"]


class _AllowlistBackend(httpcore.SyncBackend):
    def __init__(self, allowlist: EgressAllowlist) -> None:
        self.allowlist = allowlist

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        addresses = checked_addresses(self.allowlist, host, port)
        for address, checked_port in addresses[:-1]:
            try:
                return super().connect_tcp(address, checked_port, timeout, local_address, socket_options)
            except httpcore.ConnectError:
                continue
        address, checked_port = addresses[-1]
        return super().connect_tcp(address, checked_port, timeout, local_address, socket_options)


class _AllowlistTransport(httpx.HTTPTransport):
    def __init__(self, allowlist: EgressAllowlist) -> None:
        super().__init__(trust_env=False)
        # httpx builds its connection pool in __init__ and takes no network
        # backend; the same pool, built with ours (httpcore's public API).
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False), network_backend=_AllowlistBackend(allowlist)
        )


def allowlist_transport(allowlist: EgressAllowlist) -> httpx.HTTPTransport:
    """An `httpx.HTTPTransport` connecting only as `allowlist` allows.

    A refused host raises `tools.egress.EgressRefused` (before any
    connection); a host that does not answer, httpx's `ConnectError`.
    """
    return _AllowlistTransport(allowlist)
