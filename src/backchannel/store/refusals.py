"""Refused messages: kept so the ledger shows every refusal with its code, its reason and an excerpt of its text."""

from __future__ import annotations

import time

from .driver import Db
from .runs import Admit

EXCERPT_CHARS = 500  # what a refusal keeps of its text: enough to tell in the ledger what was said


def excerpt(message: str) -> str:
    """The first EXCERPT_CHARS characters of a refused message, and a mark of how much was left out."""
    if len(message) <= EXCERPT_CHARS:
        return message
    return f"{message[:EXCERPT_CHARS]}… [{len(message) - EXCERPT_CHARS:,} more characters not kept]"


async def record(
    db: Db,
    *,
    sender: str,
    target: str,
    code: str,
    reason: str,
    message: str,
    hops: int,
    wait: float | None,
    admit: Admit | None = None,
) -> None:
    """Keep a refusal; `admit` (the sender's rate) runs first in its transaction, and raises to keep nothing."""
    async with db.tx() as tx:
        if admit is not None:
            await admit(tx)
        await tx.run(
            "INSERT INTO refusals (sender, target, code, reason, message, hops, wait_seconds, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (sender, target, code, reason, excerpt(message), hops, wait, time.time()),
        )
