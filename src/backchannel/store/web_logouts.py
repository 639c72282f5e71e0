"""The web view's logged-out sessions: each session id with the time its cookie would have expired anyway."""

from __future__ import annotations

from .driver import Db


async def add(db: Db, sid: str, until: float, *, now: float) -> None:
    """Record `sid` as logged out until `until`, dropping the entries whose cookies have expired."""
    async with db.tx() as tx:
        await tx.run("DELETE FROM web_logouts WHERE until <= ?", (now,))
        await tx.run(
            "INSERT INTO web_logouts (sid, until) VALUES (?, ?) ON CONFLICT (sid) DO UPDATE SET until = excluded.until",
            (sid, until),
        )


async def unexpired(db: Db, *, now: float) -> dict[str, float]:
    """The logged-out session ids whose cookies could still be presented, with their expiry."""
    return {str(r[0]): float(r[1]) for r in await db.all("SELECT sid, until FROM web_logouts WHERE until > ?", (now,))}
