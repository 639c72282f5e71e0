"""Refused messages: kept so the ledger shows every refusal with its code and reason."""

from __future__ import annotations

import time

from .driver import Db


async def record(
    db: Db, *, sender: str, target: str, code: str, reason: str, message: str, hops: int, wait: float | None
) -> None:
    async with db.tx() as tx:
        await tx.run(
            "INSERT INTO refusals (sender, target, code, reason, message, hops, wait_seconds, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (sender, target, code, reason, message, hops, wait, time.time()),
        )
