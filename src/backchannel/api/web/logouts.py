"""The web view's logouts: a cookie logged out stays out after the gateway restarts (kept by the core's
`Revocations`)."""

from __future__ import annotations

import time

from ...core.revocations import Revocations


class WebLogouts:
    """Which web sessions were logged out before their cookies expire.

    Read on every web request, so held in memory, loaded from the store when the app starts (`load`); only this
    gateway writes them, through `revoke`, whose answer leaves once the logout is on disk. Before `load`, every
    session counts as logged out (a cookie is never let in on the strength of a list not read yet)."""

    def __init__(self, revocations: Revocations) -> None:
        self._revocations = revocations
        self._until: dict[str, float] | None = None

    async def load(self) -> None:
        """Read the logouts kept in the store (the app's start)."""
        self._until = await self._revocations.unexpired(now=time.time())

    def revoked(self, sid: str) -> bool:
        if self._until is None:
            return True
        until = self._until.get(sid)
        return until is not None and until > time.time()

    async def revoke(self, sid: str, *, until: float) -> None:
        now = time.time()
        await self._revocations.revoke(sid, until=until, now=now)
        if self._until is None:
            await self.load()
        assert self._until is not None
        self._until = {s: u for s, u in self._until.items() if u > now}
        self._until[sid] = until
