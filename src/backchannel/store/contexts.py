"""A2A contexts a client chose: each (caller, profile, contextId) bound to the session of that profile it started.

A caller is whoever holds a key (`human:a2a` for the person's, `peer:NAME` for a peer's): the same contextId
from two callers is two sessions, and neither learns of the other's.
"""

from __future__ import annotations

import time

from ..records import Session
from .driver import Db
from .sessions import get_session, insert_session


async def find(db: Db, *, caller: str, profile: str, context_id: str) -> Session | None:
    """The session `caller` started in `profile` with `context_id`; None when it started none."""
    row = await db.one(
        "SELECT session_id FROM a2a_contexts WHERE caller = ? AND profile = ? AND context_id = ?",
        (caller, profile, context_id),
    )
    return await get_session(db, row[0]) if row is not None else None


async def bind(db: Db, *, caller: str, profile: str, context_id: str, session_id: str, limit: int | None) -> Session:
    """A new session `session_id` of `profile` bound to (caller, context_id), both written together; the session
    already bound when another writer bound it first."""
    async with db.tx() as tx:
        row = await tx.one(
            f"SELECT session_id FROM a2a_contexts WHERE caller = ? AND profile = ? AND context_id = ?"
            f"{db.dialect.for_update}",
            (caller, profile, context_id),
        )
        if row is None:
            session = await insert_session(tx, profile, source="a2a", session_id=session_id, limit=limit)
            await tx.run(
                "INSERT INTO a2a_contexts (caller, profile, context_id, session_id, created_at) VALUES (?, ?, ?, ?, ?)",
                (caller, profile, context_id, session.id, time.time()),
            )
            return session
    return await get_session(db, row[0])


async def of_sessions(db: Db, *, caller: str, session_ids: list[str]) -> dict[str, str]:
    """The contextIds `caller` knows the given sessions by (those it started with a contextId of its own)."""
    unique = sorted(set(session_ids))
    if not unique:
        return {}
    marks = ", ".join("?" for _ in unique)
    rows = await db.all(
        f"SELECT session_id, context_id FROM a2a_contexts WHERE caller = ? AND session_id IN ({marks})",
        (caller, *unique),
    )
    return {r[0]: r[1] for r in rows}
