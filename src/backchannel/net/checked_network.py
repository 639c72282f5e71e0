"""A network for httpx that screens where it connects: each address a host resolves to is put to a check when
the connection is made (push receivers are screened so: `net.screening`). Loaded only by a client that asks
for it (`net.http.Transport(check_address=...)`)."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable
from typing import Any

import httpcore
import httpx

# Called with a host and each address it resolves to before any connection to it; raising refuses the host.
AddressCheck = Callable[[str, str], None]

__all__ = ["CheckedNetwork", "checked_transport"]


class CheckedNetwork(httpcore.AsyncNetworkBackend):
    """The network as usual, but a host is resolved here and every address it resolves to is put to `check`
    when the connection is made (not merely when the URL was given: DNS rebinding); then each is tried."""

    def __init__(self, check: AddressCheck) -> None:
        self._check = check
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"resolving {host!r} took over {timeout:g}s") from exc
        except OSError as exc:
            raise httpcore.ConnectError(f"could not resolve {host!r}: {exc}") from exc
        addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
        for address in addresses:
            self._check(host, address)
        failed: Exception = httpcore.ConnectError(f"{host!r} resolves to no address")
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failed = exc
        raise failed

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError(f"no unix sockets here ({path})")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def checked_transport(check: AddressCheck, *, limits: httpx.Limits, tls: ssl.SSLContext) -> httpx.AsyncHTTPTransport:
    """httpx's own transport (its error mapping kept) over a pool that connects through `CheckedNetwork`."""
    transport = httpx.AsyncHTTPTransport(verify=tls, trust_env=False, limits=limits)
    # httpx takes no network backend of its own; its pool is replaced with one of the same settings that does.
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=tls,
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=CheckedNetwork(check),
    )
    return transport
