"""The web view's logouts: a cookie logged out stays out after the gateway restarts (kept by the core's
`Revocations`)."""

from __future__ import annotations

import time

from ...core.revocations import Revocations


class WebLogouts:
    """Which web sessions were logged out before their cookies expire.

    Read on every web request, so held in memory, loaded from the store on first use; only this gateway
    writes them, through `revoke`, whose answer leaves once the logout is on disk."""

    def __init__(self, revocations: Revocations) -> None:
        self._revocations = revocations
        self._until: dict[str, float] | None = None

    def _known(self) -> dict[str, float]:
        if self._until is None:
            self._until = self._revocations.unexpired(now=time.time())
        return self._until

    def revoked(self, sid: str) -> bool:
        until = self._known().get(sid)
        return until is not None and until > time.time()

    async def revoke(self, sid: str, *, until: float) -> None:
        now = time.time()
        await self._revocations.revoke(sid, until=until, now=now)
        self._until = {s: u for s, u in self._known().items() if u > now}
        self._until[sid] = until
