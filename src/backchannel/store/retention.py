"""Retention (`store.keep_days`): the text of what ended long ago removed, the ledger's rows kept.

A run that ended (completed, failed, cancelled, expired, denied) and was created before the cut loses its message,
its reply and its files; a message sent to a peer whose outcome is known, and a refusal, lose their message. Never
touched: a run held, queued or running, a run whose sender is still owed its wake-up (the reply is what the
wake-up carries), and a run whose A2A push notifications are still owed (each one's body is built from the run
when it is delivered: core/push_bodies.py). Sessions' histories are the agents' own and stay.

Each pass reads only what was created since the last one (`store_meta`'s `retention_through`), from the oldest run
that was still waiting or owed then: a store of a million runs is not read again every hour, and no run is
passed over for good. A message to a peer whose outcome was not yet known at its pass keeps its text (the cursor
waits for runs only): kept too long, never removed too soon.
"""

from __future__ import annotations

from .. import keys
from .driver import Db

REMOVED = "(removed: older than store.keep_days)"
BATCH = 500  # runs per transaction: a long prune never holds the store for long
THROUGH = "retention_through"  # store_meta: every run created before this was pruned, or is not to be
ENDED = "r.state IN ('completed', 'failed', 'cancelled', 'expired', 'denied')"
NOT_OWED = (
    "((r.wake = 0 OR EXISTS (SELECT 1 FROM runs w WHERE w.idempotency_key = ? || r.id))"
    " AND NOT EXISTS (SELECT 1 FROM push_configs c WHERE c.task_id = r.id AND (c.done = 0"
    " OR EXISTS (SELECT 1 FROM push_outbox o WHERE o.config_seq = c.seq AND o.state = 'pending'))))"
)


async def prune(db: Db, *, before: float, now: float) -> int:
    """Remove the text of what ended and was created before `before`; how many runs lost theirs."""
    row = await db.one("SELECT value FROM store_meta WHERE key = ?", (THROUGH,))
    since = float(row[0]) if row is not None else 0.0
    if since >= before:
        return 0
    total, cursor = 0, since
    while True:
        async with db.tx() as tx:
            rows = await tx.all(
                "SELECT id, created_at FROM runs r WHERE r.created_at >= ? AND r.created_at < ? AND r.pruned_at IS NULL"
                f" AND {ENDED} AND {NOT_OWED} ORDER BY r.created_at LIMIT ?",
                (cursor, before, keys.WAKE, BATCH),
            )
            ids = [r["id"] for r in rows]
            if ids:
                cursor = rows[-1]["created_at"]
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
            " WHERE created_at >= ? AND created_at < ? AND state IN ('delivered', 'failed', 'refused')",
            (REMOVED, REMOVED, since, before),
        )
        await tx.run(
            "UPDATE refusals SET message = ? WHERE created_at >= ? AND created_at < ?", (REMOVED, since, before)
        )
        # The next pass begins at the oldest run still waiting or owed (it is pruned once it ended), else here.
        waiting = await tx.one(
            f"SELECT MIN(r.created_at) FROM runs r WHERE r.created_at >= ? AND r.created_at < ?"
            f" AND NOT ({ENDED} AND {NOT_OWED})",
            (since, before, keys.WAKE),
        )
        through = min(before, float(waiting[0])) if waiting is not None and waiting[0] is not None else before
        await tx.run(
            "INSERT INTO store_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (THROUGH, repr(through)),
        )
    return total
