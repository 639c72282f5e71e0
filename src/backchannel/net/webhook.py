"""POSTs to the receivers callers name (A2A push notifications): screened addresses, no redirects, bounded.

The POSTs go over net/http's Transport, one pool for every receiver, whose connections are screened: a host
name reaches only the addresses the home's `Screen` allows when the connection is made, not merely when the
URL was given (DNS rebinding); an address written in the URL is checked before anything is sent. A redirect
is an answer like any other (never followed: it could lead anywhere); a receiver's answer is read only as
far as a short error detail, as sent (never decompressed).

Every failure becomes a `PushFailed` naming the receiver, with its cause:

    a refused address (at the URL or its resolution)   PushFailed "… is a loopback address …"
    no connection, a cut one, an unreadable answer     PushFailed "could not reach …" / "the connection … broke"
    no connection within the connect timeout           PushFailed "… did not answer POST … in time"
    no answer within the timeout                       PushFailed "… did not answer within …"

A receiver that accepts a connection and never answers holds it for the whole timeout: the timeouts are short
(a receiver acknowledges, it does not work) so that its slot comes back soon (core/push_slots.py).
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

from .. import __version__
from ..errors import PushFailed, UsageError
from .http import Naming, Transport, retry_after
from .screening import Screen, Target, shown_url

USER_AGENT = f"backchannel/{__version__}"
DETAIL_BYTES = 512  # of a refusing receiver's answer, for the log
MAX_CONNECTIONS = 64
# The transport's own timeouts (connect, read, write) a little past the whole POST's, which decides.
BACKSTOP_SECONDS = 1.0


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

    def __init__(
        self,
        screen: Screen,
        *,
        timeout: float,
        connect_timeout: float | None = None,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        """`timeout` bounds a whole POST, `connect_timeout` (None: the same) the making of its connection;
        `max_connections`: at least as many as POSTs are sent at once (a POST never waits for the pool)."""
        self.screen = screen
        self.timeout = timeout
        self.connect_timeout = timeout if connect_timeout is None else min(connect_timeout, timeout)
        self.max_connections = max_connections
        self._transport: Transport | None = None  # made with the first push (a CLI's one-off gateway makes none)

    @property
    def _http(self) -> Transport:
        if self._transport is None:
            self._transport = Transport(
                "",
                None,
                naming=self._naming("a push receiver"),
                follow_redirects=False,
                timeout=self.timeout + BACKSTOP_SECONDS,
                connect_timeout=self.connect_timeout,
                retries=0,  # the pushes' own schedule retries (and honours Retry-After)
                user_agent=USER_AGENT,
                max_connections=self.max_connections,
                check_address=self._check_resolved,
            )
        return self._transport

    @staticmethod
    def _naming(who: str) -> Naming:
        return Naming(who=who, not_sent=PushFailed, maybe_sent=PushFailed)

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> Answer:
        """POST `body` to `url`; the receiver's answer, whatever its status. PushFailed when none came."""
        try:
            target = self.screen.target(url)
        except UsageError as exc:
            raise PushFailed(exc.message) from exc
        self._check_literal(target)
        shown = shown_url(url)
        naming = self._naming(f"the receiver {shown!r}")
        try:
            async with (
                asyncio.timeout(self.timeout),
                self._http.stream("POST", url, content=body, headers=headers, naming=naming) as response,
            ):
                ok = 200 <= response.status < 300
                detail = b"" if ok else await response.head(DETAIL_BYTES)
                wait = response.headers.get("retry-after")
                return Answer(
                    response.status,
                    retry_after(wait) if wait and response.status in (429, 503) else None,
                    detail.decode("utf-8", "replace").strip(),
                )
        except _Refused as exc:
            raise PushFailed(self.screen.refused_message(target, exc.why)) from exc
        except TimeoutError as exc:
            raise PushFailed(f"the receiver {shown!r} did not answer within {self.timeout:g}s") from exc

    def _check_resolved(self, host: str, address: str) -> None:
        """Each address a host resolves to when a connection is made: every one allowed, or the host refused."""
        why = self.screen.refusal(host.lower(), address)
        if why is not None:
            raise _Refused(why)

    def _check_literal(self, target: Target) -> None:
        """An address in the URL itself: checked here, before anything is sent."""
        try:
            literal = str(ipaddress.ip_address(target.host.strip("[]")))
        except ValueError:
            return
        why = self.screen.refusal(target.host, literal)
        if why is not None:
            raise PushFailed(self.screen.refused_message(target, why))

    async def aclose(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()


class _Refused(Exception):
    """A resolved address the screen refuses (raised as the connection is made, so it never starts)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why
