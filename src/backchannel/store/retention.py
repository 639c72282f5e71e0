"""Retention (`store.keep_days`): the text of what ended long ago removed, the ledger's rows kept.

A run that ended (completed, failed, cancelled, expired, denied) and was created before the cut loses its message,
its reply and its files; a message sent to a peer whose outcome is known, and a refusal, lose their message. Never
touched: a run held, queued or running, and a run whose sender is still owed its wake-up (the reply is what the
wake-up carries). Sessions' histories are the agents' own and stay.
"""

from __future__ import annotations

from .. import keys
from .driver import Db

REMOVED = "(removed: older than store.keep_days)"
BATCH = 500  # runs per transaction: a long prune never holds the store for long


async def prune(db: Db, *, before: float, now: float) -> int:
    """Remove the text of what ended and was created before `before`; how many runs lost theirs."""
    total = 0
    while True:
        async with db.tx() as tx:
            rows = await tx.all(
                "SELECT id FROM runs r WHERE r.pruned_at IS NULL AND r.created_at < ?"
                " AND r.state IN ('completed', 'failed', 'cancelled', 'expired', 'denied')"
                " AND (r.wake = 0 OR EXISTS (SELECT 1 FROM runs w WHERE w.idempotency_key = ? || r.id))"
                " ORDER BY r.created_at LIMIT ?",
                (before, keys.WAKE, BATCH),
            )
            ids = [r["id"] for r in rows]
            if ids:
                await tx.many(
                    "UPDATE runs SET message = ?, reply = CASE WHEN reply IS NULL THEN NULL ELSE ? END,"
                    " pruned_at = ? WHERE id = ?",
                    [(REMOVED, REMOVED, now, run_id) for run_id in ids],
                )
                await tx.many("DELETE FROM run_files WHERE run_id = ?", [(run_id,) for run_id in ids])
        total += len(ids)
        if len(ids) < BATCH:
            break
    async with db.tx() as tx:
        await tx.run(
            "UPDATE outbound SET message = ?, reply = CASE WHEN reply IS NULL THEN NULL ELSE ? END"
            " WHERE created_at < ? AND message <> ? AND state IN ('delivered', 'failed', 'refused')",
            (REMOVED, REMOVED, before, REMOVED),
        )
        await tx.run(
            "UPDATE refusals SET message = ? WHERE created_at < ? AND message <> ?", (REMOVED, before, REMOVED)
        )
    return total
