"""Senders' rates counted in the store, so that gateways sharing one count each sender once (`core.delivery.rates`
counts in the process on a home of its own).

A sliding minute is estimated from two fixed ones (this minute's count, and the last minute's weighted by how much
of it still lies in the window); a sender's count row is locked while it is read and raised, so gateways admitting
the same sender at once are counted one after the other.
"""

from __future__ import annotations

import math

from .driver import Db, Tx

WINDOW_SECONDS = 60


async def admit(db: Db, tx: Tx, sender: str, *, per_minute: int, now: float) -> float | None:
    """Count a new run of `sender` now, inside the caller's transaction; or, when its minute is full, count nothing
    and return how many seconds until it may go again."""
    minute = int(now // WINDOW_SECONDS)
    rows = await tx.all(
        f"SELECT minute, count FROM sender_rates WHERE sender = ? AND minute >= ?{db.dialect.for_update}",
        (sender, minute - 1),
    )
    counts = {int(r[0]): int(r[1]) for r in rows}
    into = (now % WINDOW_SECONDS) / WINDOW_SECONDS  # how far into this minute: the last one's share still counted
    estimate = counts.get(minute, 0) + counts.get(minute - 1, 0) * (1.0 - into)
    if estimate >= per_minute:
        return float(max(1, math.ceil((1.0 - into) * WINDOW_SECONDS)))
    await tx.run(
        "INSERT INTO sender_rates (sender, minute, count) VALUES (?, ?, 1)"
        " ON CONFLICT (sender, minute) DO UPDATE SET count = sender_rates.count + 1",
        (sender, minute),
    )
    await tx.run("DELETE FROM sender_rates WHERE sender = ? AND minute < ?", (sender, minute - 1))
    return None
