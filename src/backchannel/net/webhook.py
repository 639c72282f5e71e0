"""POSTs to the receivers callers name (A2A push notifications): screened addresses, no redirects, bounded.

Every connection goes through `ScreenedResolver`, so a host name reaches only the addresses the home's
`Screen` allows when the connection is made, not merely when the URL was given (DNS rebinding); an address
written in the URL is checked before anything is sent. A redirect is an answer like any other (never
followed: it could lead anywhere); a receiver's answer is read only as far as a short error detail.

Every aiohttp error becomes a `PushFailed` naming the receiver, with its cause; nothing aiohttp escapes:

    a refused address (at the URL or its resolution)   PushFailed "… is a loopback address …"
    no connection, a cut one, an unreadable answer     PushFailed "could not reach …" / "the connection … broke"
    no answer within the timeout                       PushFailed "… did not answer within …"
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from .. import __version__
from ..errors import PushFailed, UsageError
from .http import retry_after, system_tls
from .screening import Screen, Target, shown_url

USER_AGENT = f"backchannel/{__version__}"
DETAIL_BYTES = 512  # of a refusing receiver's answer, for the log


class Refused(OSError):
    """A resolved address the screen refuses (raised inside the resolver, so the connection never starts)."""


class ScreenedResolver(AbstractResolver):
    """The system's resolver, whose answers the screen must allow: every one, or the name is refused."""

    def __init__(self, screen: Screen) -> None:
        self._screen = screen
        self._inner = aiohttp.ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        for result in found:
            why = self._screen.refusal(host.lower(), result["host"])
            if why is not None:
                raise Refused(why)
        return found

    async def close(self) -> None:
        await self._inner.close()


@dataclass(frozen=True)
class Answer:
    """What a receiver answered: its status, how long it asked us to wait (429, 503), and a short detail."""

    status: int
    retry_after: float | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class Webhooks:
    """One connection pool for every receiver; `post` sends one body and reports the answer."""

    def __init__(self, screen: Screen, *, timeout: float) -> None:
        self.screen = screen
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:  # made in the running loop, on first use
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(resolver=ScreenedResolver(self.screen), ssl=system_tls(), limit=64),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                headers={"User-Agent": USER_AGENT},
                trust_env=False,
                auto_decompress=False,
            )
        return self._session

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> Answer:
        """POST `body` to `url`; the receiver's answer, whatever its status. PushFailed when none came."""
        try:
            target = self.screen.target(url)
        except UsageError as exc:
            raise PushFailed(exc.message) from exc
        self._check_literal(target)
        shown = shown_url(url)
        try:
            async with self._client().post(url, data=body, headers=dict(headers), allow_redirects=False) as response:
                detail = b"" if 200 <= response.status < 300 else await response.content.read(DETAIL_BYTES)
                wait = response.headers.get("Retry-After")
                return Answer(
                    response.status,
                    retry_after(wait) if wait and response.status in (429, 503) else None,
                    detail.decode("utf-8", "replace").strip(),
                )
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, Refused):
                raise PushFailed(self.screen.refused_message(target, str(exc.os_error))) from exc
            raise PushFailed(f"could not reach the receiver {shown!r}: {exc.os_error.strerror or exc}") from exc
        except TimeoutError as exc:
            raise PushFailed(f"the receiver {shown!r} did not answer within {self.timeout:g}s") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise PushFailed(f"the connection to the receiver {shown!r} broke: {type(exc).__name__} {exc}") from exc

    def _check_literal(self, target: Target) -> None:
        """An address in the URL itself never goes through the resolver: checked here, before anything is sent."""
        try:
            literal = str(ipaddress.ip_address(target.host.strip("[]")))
        except ValueError:
            return
        why = self.screen.refusal(target.host, literal)
        if why is not None:
            raise PushFailed(self.screen.refused_message(target, why))

    async def aclose(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
            await asyncio.sleep(0)  # let the connector's transports close before the loop moves on
