"""Counts for the gateway's metrics, read at each scrape (every gateway on the store alike)."""

from __future__ import annotations

from .driver import Db


async def live_runs(db: Db) -> list[tuple[str, str, int]]:
    """(profile, state, how many) of the runs queued, running or held."""
    rows = await db.all(
        "SELECT profile, state, COUNT(*) FROM runs WHERE state IN ('queued', 'running', 'held') GROUP BY profile, state"
    )
    return [(str(r[0]), str(r[1]), int(r[2])) for r in rows]


async def refusals_by_code(db: Db) -> list[tuple[str, int]]:
    """(code, how many) of every refusal recorded."""
    rows = await db.all("SELECT code, COUNT(*) FROM refusals GROUP BY code ORDER BY code")
    return [(str(r[0]), int(r[1])) for r in rows]
