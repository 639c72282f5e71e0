"""Open streams counted at the HTTP door: how many one peer's key, one run and all the peers together may hold.

A stream (a run's events, chat/stream, A2A's SendStreamingMessage and SubscribeToTask) holds a connection for
as long as it lasts, and the server's connection cap (`max_connections`) is met before any key is known: one
peer's key that opened streams without end would leave nobody else a connection. So a peer's key holds at most
`max_streams_per_key`, one run has at most `max_streams_per_run` followers among the peers, and the peers
together stay `reserved_connections` under the cap; past a bound the request is refused (429 too_many_streams,
naming the bound) before anything is done. The person's streams are not counted (their key is the home's own;
the door keeps room for it, `protocol.Door`).

A slot is taken before the stream's work begins and given back once its response has been sent, or has
failed, or its reader left; a request that fails before its response is made gives it back at once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from types import TracebackType

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..core.access import Caller
from ..errors import TooManyStreams
from ..home.config import GatewayConfig

RETRY_AFTER_SECONDS = 5.0  # a stream ends with its run, or when its reader leaves: soon, most often


@dataclass(frozen=True)
class StreamLimits:
    per_key: int
    per_run: int
    peers: int  # every peer's key together
    shown_peers: str  # how the peers' bound is set, for the refusal

    @classmethod
    def of(cls, settings: GatewayConfig) -> StreamLimits:
        return cls(
            per_key=settings.max_streams_per_key,
            per_run=settings.max_streams_per_run,
            peers=settings.peer_streams,
            shown_peers=f"gateway.max_connections {settings.max_connections} less gateway.reserved_connections"
            f" {settings.reserved_connections}",
        )


class StreamCaps:
    """The streams open now, by peer key and by run; one per gateway process, read and changed on its loop."""

    def __init__(self, limits: StreamLimits) -> None:
        self.limits = limits
        self._by_key: Counter[str] = Counter()
        self._by_run: Counter[str] = Counter()
        self._peers = 0

    def take(self, who: Caller, run_id: str | None = None) -> Slot:
        """A slot for the stream `who` opens (following `run_id`, when it follows one); TooManyStreams past a
        bound. The person's slot counts nothing."""
        if who.peer is None:
            return Slot(self, None, None)
        limits = self.limits
        if self._by_key[who.peer] >= limits.per_key:
            raise self._refusal(
                f"{who.shown} holds {self._by_key[who.peer]} open streams, the most one key may"
                f" (gateway.max_streams_per_key {limits.per_key})"
            )
        if run_id is not None and self._by_run[run_id] >= limits.per_run:
            raise self._refusal(
                f"run {run_id!r} has {self._by_run[run_id]} open streams from peers' keys, the most one run may"
                f" (gateway.max_streams_per_run {limits.per_run})"
            )
        if self._peers >= limits.peers:
            raise self._refusal(
                f"the peers' keys hold {self._peers} open streams, the most they may together ({limits.shown_peers}:"
                " the rest is kept for the person)"
            )
        self._by_key[who.peer] += 1
        if run_id is not None:
            self._by_run[run_id] += 1
        self._peers += 1
        return Slot(self, who.peer, run_id)

    def release(self, peer: str, run_id: str | None) -> None:
        """A stream of `peer`'s key (following `run_id`) has ended."""
        _less(self._by_key, peer)
        if run_id is not None:
            _less(self._by_run, run_id)
        self._peers -= 1

    @staticmethod
    def _refusal(why: str) -> TooManyStreams:
        return TooManyStreams(
            f"too many streams: {why}; close one, or try again once one has ended", retry_after=RETRY_AFTER_SECONDS
        )


def _less(counts: Counter[str], key: str) -> None:
    counts[key] -= 1
    if counts[key] <= 0:
        del counts[key]  # no key or run is remembered once its streams are gone


class Slot:
    """One stream's place, given back once (`give_back`, or by the response `holding` makes, once it is sent).

    As a context manager around the stream's making: a request that fails, or ends without handing the slot
    to a response, gives it back on leaving the block."""

    def __init__(self, caps: StreamCaps, peer: str | None, run_id: str | None) -> None:
        self._caps = caps
        self._peer = peer
        self._run_id = run_id
        self._held = peer is not None
        self._handed = False

    def give_back(self) -> None:
        if self._held:
            self._held = False
            assert self._peer is not None
            self._caps.release(self._peer, self._run_id)

    def holding(self, response: Response) -> Response:
        """`response`, sent as it is, the slot given back once it has been sent (or has failed)."""
        self._handed = True
        return _Holding(response, self)

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc is not None or not self._handed:
            self.give_back()


class _Holding(Response):
    """A response sent as another one is, holding a stream's slot until it has been sent (nothing of a
    Response's own is made: the status is read for a request's span)."""

    def __init__(self, inner: Response, slot: Slot) -> None:
        self.inner = inner
        self.slot = slot
        self.status_code = inner.status_code
        self.background = None
        self.raw_headers = inner.raw_headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.inner(scope, receive, send)
        finally:
            self.slot.give_back()
