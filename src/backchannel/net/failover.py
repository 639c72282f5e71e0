"""One peer at several URLs: the gateways that share one store, reached through whichever answers.

A call goes to the URL that answered last (the first, to begin with) and moves on to the next, with the same
arguments and so the same idempotency key, when nothing reached that one (`PeerUnreachable`: sending again is
safe). For a Backchannel peer, whose runs are filed under their keys in the store all its gateways share, a call
whose outcome is unknown (the gateway went away mid-request) is asked of the next one too: it answers for the
run the first one accepted, or accepts it once, so the outcome stays exactly-once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Self, TypeVar

from ..errors import PeerError, PeerOutcomeUnknown, PeerUnreachable
from ..events import Event
from ..outcome import Outcome, Result, Run
from .link import PLAIN, Envelope, PeerAbout, PeerLink

T = TypeVar("T")


class FailoverLink:
    """`PeerLink` over one link per URL of a peer, in order (`make(url)` builds each when it is first used)."""

    def __init__(self, make: Callable[[str], PeerLink], urls: tuple[str, ...], *, ask_again_when_unknown: bool) -> None:
        if not urls:
            raise ValueError("a peer needs at least one URL")
        self._make = make
        self._urls = urls
        self._again_when_unknown = ask_again_when_unknown
        self._links: dict[int, PeerLink] = {}
        self._current = 0
        self._stack = AsyncExitStack()
        self.to = make(urls[0]).to

    async def __aenter__(self) -> Self:
        await self._stack.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def _link(self, index: int) -> PeerLink:
        link = self._links.get(index)
        if link is None:
            link = self._links[index] = await self._stack.enter_async_context(self._make(self._urls[index]))
        return link

    def _moves_on(self, exc: PeerError) -> bool:
        return isinstance(exc, PeerUnreachable) or (self._again_when_unknown and isinstance(exc, PeerOutcomeUnknown))

    async def _each(self, call: Callable[[PeerLink], Awaitable[T]]) -> T:
        """`call` on the current URL's link, then on the next ones while nothing reached them (or, where that is
        safe, while the outcome is unknown: raised, or answered as a `Result` that says so)."""
        failure: PeerError | None = None
        unknown: T | None = None
        for step in range(len(self._urls)):
            index = (self._current + step) % len(self._urls)
            try:
                found = await call(await self._link(index))
            except PeerError as exc:
                if not self._moves_on(exc):
                    raise
                failure = exc
                continue
            if self._again_when_unknown and isinstance(found, Result) and found.outcome is Outcome.UNKNOWN:
                unknown = found
                continue
            self._current = index
            return found
        if unknown is not None:
            return unknown
        assert failure is not None
        raise failure

    async def about(self, *, timeout: float = 10, strict: bool = False) -> PeerAbout:
        if not strict:
            for step in range(len(self._urls)):
                about = await (await self._link((self._current + step) % len(self._urls))).about(timeout=timeout)
                if about.answered:
                    return about
            return PeerAbout()
        return await self._each(lambda link: link.about(timeout=timeout, strict=True))

    async def health(self) -> PeerAbout:
        for step in range(len(self._urls)):
            index = (self._current + step) % len(self._urls)
            found = await (await self._link(index)).health()
            if found.answered:
                self._current = index
                return found
        return PeerAbout()

    async def dm(
        self,
        message: str,
        *,
        wait: float,
        key: str,
        envelope: Envelope = PLAIN,
    ) -> Result:
        return await self._each(lambda link: link.dm(message, wait=wait, key=key, envelope=envelope))

    async def start(
        self,
        message: str,
        *,
        key: str,
        envelope: Envelope = PLAIN,
    ) -> Result:
        return await self._each(lambda link: link.start(message, key=key, envelope=envelope))

    async def status(self, run_id: str) -> Run | None:
        return await self._each(lambda link: link.status(run_id))

    async def stop(self, run_id: str) -> Run:
        return await self._each(lambda link: link.stop(run_id))

    async def answer(self, run_id: str, session_id: str | None, text: str, *, key: str) -> None:
        await self._each(lambda link: link.answer(run_id, session_id, text, key=key))

    async def events(self, run_id: str) -> AsyncIterator[Event]:
        """The run's events from the first URL whose stream opens (a stream cut later ends here, as on one URL:
        the follower asks for the run's state, which moves on to the next URL by itself)."""
        failure: PeerError | None = None
        for step in range(len(self._urls)):
            index = (self._current + step) % len(self._urls)
            started = False
            try:
                async for event in (await self._link(index)).events(run_id):
                    started = True
                    yield event
                return
            except PeerError as exc:
                if started or not isinstance(exc, PeerUnreachable):
                    raise
                failure = exc
        assert failure is not None
        raise failure
