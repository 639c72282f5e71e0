"""The web view's logouts, kept in state.db: a cookie logged out stays out after the gateway restarts."""

from __future__ import annotations

import time

from ..store import web_logouts
from ..store.db import Database
from .queue.commits import commits


class WebLogouts:
    """Which web sessions were logged out before their cookies expire.

    Read on every web request, so held in memory, loaded from the store on first use; only this gateway
    writes them, through `revoke`, whose answer leaves once the logout is on disk."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._until: dict[str, float] | None = None

    def _known(self) -> dict[str, float]:
        if self._until is None:
            self._until = web_logouts.unexpired(self.db, now=time.time())
        return self._until

    def revoked(self, sid: str) -> bool:
        until = self._known().get(sid)
        return until is not None and until > time.time()

    @commits
    async def revoke(self, sid: str, *, until: float) -> None:
        now = time.time()
        web_logouts.add(self.db, sid, until, now=now)
        self._until = {s: u for s, u in self._known().items() if u > now}
        self._until[sid] = until
