"""Idle notices an agent asked for (`notify_when_idle`): kept until the target session has nothing queued or running
and the notice is delivered into the asking session, so a gateway's restart loses none."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from .driver import Db, Row


@dataclass(frozen=True)
class IdleWatch:
    """A notice owed: who asked (its session, hop and exchange), about which session, since when."""

    id: str
    session_id: str  # the session whose queue is watched
    target: str  # its address as the asker named it
    sender: str
    sender_session: str
    hops: int
    origin: str | None
    created_at: float


def _watch(row: Row) -> IdleWatch:
    return IdleWatch(
        id=row["id"],
        session_id=row["session_id"],
        target=row["target"],
        sender=row["sender"],
        sender_session=row["sender_session"],
        hops=row["hops"],
        origin=row["origin"],
        created_at=row["created_at"],
    )


async def busy(db: Db, session_id: str) -> bool:
    """Whether the session has a run queued or running (in any process)."""
    found = await db.one(
        "SELECT 1 FROM runs WHERE session_id = ? AND state IN ('queued', 'running') LIMIT 1", (session_id,)
    )
    return found is not None


async def watch(
    db: Db, *, session_id: str, target: str, sender: str, sender_session: str, hops: int, origin: str | None
) -> IdleWatch:
    """A notice owed from now on."""
    row_id = "idle_" + uuid.uuid4().hex
    now = time.time()
    async with db.tx() as tx:
        await tx.run(
            "INSERT INTO idle_watches (id, session_id, target, sender, sender_session, hops, origin, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (row_id, session_id, target, sender, sender_session, hops, origin, now),
        )
    return IdleWatch(row_id, session_id, target, sender, sender_session, hops, origin, now)


async def pending(db: Db) -> list[IdleWatch]:
    """The notices still owed, oldest first."""
    rows = await db.all("SELECT * FROM idle_watches WHERE noticed_at IS NULL ORDER BY created_at")
    return [_watch(r) for r in rows]


async def noticed(db: Db, watch_id: str) -> None:
    async with db.tx() as tx:
        await tx.run(
            "UPDATE idle_watches SET noticed_at = ? WHERE id = ? AND noticed_at IS NULL", (time.time(), watch_id)
        )
