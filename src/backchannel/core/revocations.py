"""Ids revoked until a time, kept in state.db: a revocation outlives a restart of the gateway.

A generic, small service: a surface keeps its own policy over it (the web view's logouts, in
`api/web/logouts.py`, hold the ids in memory and say what is revoked); this keeps them durable.
"""

from __future__ import annotations

from ..store import web_logouts
from ..store.driver import Db
from .queue.commits import commits


class Revocations:
    """Which ids are revoked, each until its own expiry; what has expired is forgotten."""

    def __init__(self, db: Db) -> None:
        self.db = db

    async def unexpired(self, *, now: float) -> dict[str, float]:
        """The ids revoked past `now`, with the time each stops mattering."""
        return await web_logouts.unexpired(self.db, now=now)

    @commits
    async def revoke(self, id_: str, *, until: float, now: float) -> None:
        """Record `id_` as revoked until `until` (answered once it is on disk), forgetting the expired ones."""
        await web_logouts.add(self.db, id_, until, now=now)
