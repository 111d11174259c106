"""An httpx transport whose every connection goes through the egress allowlist (docs/sandbox.md#network).

`search_web`'s requests to Exa use it, so the service's own fetches obey the
same allowlist as the sandbox's proxy: `tools.egress.checked_addresses`
checks the host, resolves it once and refuses a private address; the
connection is then made to that checked address (TLS still verifies the
host name).

Built from the two libraries' public APIs only: httpx's custom transport
(`httpx.BaseTransport.handle_request`) over an httpcore `ConnectionPool`
given our network backend (`httpcore.SyncBackend`, httpcore's documented
network-backend interface). httpx's own `HTTPTransport` takes no network
backend, and replacing its pool would mean writing a private attribute.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import httpcore
import httpx

from tools.egress import EgressAllowlist, checked_addresses

__all__ = ["AllowlistTransport", "allowlist_transport"]

#: httpcore's exceptions as httpx raises them (most specific first), so callers catch httpx's as usual.
_HTTPX_ERRORS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
)


@contextlib.contextmanager
def _as_httpx_errors() -> Iterator[None]:
    try:
        yield
    except Exception as error:
        for core, mapped in _HTTPX_ERRORS:
            if isinstance(error, core):
                raise mapped(str(error)) from error
        raise


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


class _ResponseBody(httpx.SyncByteStream):
    """httpcore's response body as httpx reads it, its errors as httpx's."""

    def __init__(self, stream: Iterable[bytes]) -> None:
        self.stream = stream

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx_errors():
            yield from self.stream

    def close(self) -> None:
        close = getattr(self.stream, "close", None)
        if close is not None:
            close()


class AllowlistTransport(httpx.BaseTransport):
    """An httpx transport connecting only as `allowlist` allows (see the module docstring)."""

    def __init__(self, allowlist: EgressAllowlist) -> None:
        self.pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False), network_backend=_AllowlistBackend(allowlist)
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, Iterable)  # a sync client's request body
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,  # the timeouts httpx set
        )
        with _as_httpx_errors():
            response = self.pool.handle_request(core_request)
        assert isinstance(response.stream, Iterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseBody(response.stream),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self.pool.close()


def allowlist_transport(allowlist: EgressAllowlist) -> httpx.BaseTransport:
    """An httpx transport connecting only as `allowlist` allows.

    A refused host raises `tools.egress.EgressRefused` (before any
    connection); a host that does not answer, httpx's `ConnectError`.
    """
    return AllowlistTransport(allowlist)
