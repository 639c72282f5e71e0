"""Chat handoffs: turns handed to the Backchannel plugin inside a Hermes gateway, to run through that gateway's own
chat pipeline, and what became of each.

A handoff is filed under its run: one per run, whatever the attempt, so a turn run again after a crash finds the
handoff it made (answered, or still with the plugin) instead of handing the message over a second time. The
plugin takes the offered handoffs of its profile, tells where each stands (`waiting` behind the person's turn,
`running` while Hermes's turn on it goes on) and settles it (`answered` with the reply, `failed` with why,
`not_a_chat`: no chat drives that session). A stopped run withdraws its handoff while the plugin has not yet
handed it to Hermes (`withdrawn`); the plugin says `waiting` or `running` before it hands one in, and one
withdrawn by then is not handed in. A taker that stops asking for work gives back what it took and never
settled (`release_stale`); the plugin then finds, by the run's id, whether it had already handed the message to
Hermes. Who takes a profile's handoffs and when it last asked is kept too: a handoff is only offered while its
plugin is there to take it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from .driver import Db, Row

State = Literal["offered", "taken", "waiting", "running", "answered", "failed", "not_a_chat", "withdrawn"]
HELD = ("taken", "waiting", "running")  # with its plugin, not settled
# Ended: settled by the plugin, or withdrawn by its stopped run before the plugin handed it to Hermes.
SETTLED: frozenset[str] = frozenset({"answered", "failed", "not_a_chat", "withdrawn"})
KEEP_SECONDS = 86_400.0  # a settled handoff is kept this long (a run re-tried within it finds its answer)


@dataclass(frozen=True)
class Handoff:
    run_id: str
    profile: str
    remote_session: str  # the Hermes session it goes into
    message: str  # the framed text, as the Hermes agent reads it
    state: State
    taker: str | None
    reply: str | None
    error: str | None
    detail: str | None  # where it stands (`waiting`: behind what)
    created_at: float
    updated_at: float

    @property
    def settled(self) -> bool:
        return self.state in SETTLED


def _handoff(row: Row) -> Handoff:
    return Handoff(
        run_id=row["run_id"],
        profile=row["profile"],
        remote_session=row["remote_session"],
        message=row["message"],
        state=row["state"],
        taker=row["taker"],
        reply=row["reply"],
        error=row["error"],
        detail=row["detail"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


async def offer(db: Db, *, run_id: str, profile: str, remote_session: str, message: str) -> Handoff:
    """File the run's handoff (offered to the profile's plugin), or return the one it already has."""
    now = time.time()
    async with db.tx() as tx:
        row = await tx.one(
            "INSERT INTO chat_handoffs (run_id, profile, remote_session, message, state, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, 'offered', ?, ?) ON CONFLICT (run_id) DO NOTHING RETURNING *",
            (run_id, profile, remote_session, message, now, now),
        )
        if row is None:
            row = await tx.one("SELECT * FROM chat_handoffs WHERE run_id = ?", (run_id,))
            assert row is not None  # the run's, which the insert ran into
    return _handoff(row)


async def get(db: Db, run_id: str) -> Handoff | None:
    row = await db.one("SELECT * FROM chat_handoffs WHERE run_id = ?", (run_id,))
    return _handoff(row) if row is not None else None


async def take(db: Db, profile: str, *, taker: str, limit: int = 16) -> list[Handoff]:
    """The profile's offered handoffs, oldest first, taken by `taker` (no other taker gets them)."""
    now = time.time()
    async with db.tx() as tx:
        rows = await tx.all(
            f"SELECT run_id FROM chat_handoffs WHERE profile = ? AND state = 'offered' ORDER BY created_at LIMIT ?"
            f"{db.dialect.skip_locked}",
            (profile, limit),
        )
        taken: list[Handoff] = []
        for r in rows:
            row = await tx.one(
                "UPDATE chat_handoffs SET state = 'taken', taker = ?, updated_at = ? WHERE run_id = ?"
                " AND state = 'offered' RETURNING *",
                (taker, now, r["run_id"]),
            )
            if row is not None:
                taken.append(_handoff(row))
    return taken


async def held_by(db: Db, profile: str, taker: str) -> list[Handoff]:
    """The handoffs `taker` holds and has not settled, oldest first."""
    rows = await db.all(
        "SELECT * FROM chat_handoffs WHERE profile = ? AND taker = ? AND state IN ('taken', 'waiting', 'running')"
        " ORDER BY created_at",
        (profile, taker),
    )
    return [_handoff(r) for r in rows]


async def settle(
    db: Db,
    run_id: str,
    *,
    profile: str,
    state: State,
    reply: str | None = None,
    error: str | None = None,
    detail: str | None = None,
) -> Handoff | None:
    """Record where a handoff of `profile` stands; a settled one stays as it was settled (None: no such handoff of
    that profile). `waiting` also says so on its run: a message waiting behind another turn was queued."""
    now = time.time()
    async with db.tx() as tx:
        row = await tx.one(
            "UPDATE chat_handoffs SET state = ?, reply = ?, error = ?, detail = ?, updated_at = ?"
            " WHERE run_id = ? AND profile = ? AND state NOT IN ('answered', 'failed', 'not_a_chat', 'withdrawn')"
            " RETURNING *",
            (state, reply, error, detail, now, run_id, profile),
        )
        if row is None:
            row = await tx.one("SELECT * FROM chat_handoffs WHERE run_id = ? AND profile = ?", (run_id, profile))
            return _handoff(row) if row is not None else None
        if state == "waiting":
            await tx.run("UPDATE runs SET landed = 'queued' WHERE id = ? AND landed = 'started'", (run_id,))
        if state in SETTLED:
            await tx.announce(run_id)
    return _handoff(row)


async def withdraw(db: Db, run_id: str) -> bool:
    """Withdraw the run's handoff if its plugin has not begun handing it to Hermes (offered, or taken only);
    whether it was withdrawn."""
    async with db.tx() as tx:
        row = await tx.one(
            "UPDATE chat_handoffs SET state = 'withdrawn', updated_at = ? WHERE run_id = ? AND state IN"
            " ('offered', 'taken') RETURNING run_id",
            (time.time(), run_id),
        )
    return row is not None


async def seen(db: Db, profile: str, taker: str) -> None:
    """`taker` asked for the profile's work now."""
    now = time.time()
    async with db.tx() as tx:
        await tx.run(
            "INSERT INTO chat_takers (profile, taker, seen_at) VALUES (?, ?, ?)"
            " ON CONFLICT (profile) DO UPDATE SET taker = excluded.taker, seen_at = excluded.seen_at",
            (profile, taker, now),
        )


async def last_seen(db: Db, profile: str) -> float | None:
    """When a plugin last asked for the profile's work (None: never)."""
    row = await db.one("SELECT seen_at FROM chat_takers WHERE profile = ?", (profile,))
    return float(row[0]) if row is not None else None


async def release_stale(db: Db, *, before: float) -> int:
    """Give back the handoffs taken by a taker not seen since `before` (it stopped): offered again. How many."""
    async with db.tx() as tx:
        return await tx.run(
            "UPDATE chat_handoffs SET state = 'offered', taker = NULL, updated_at = ?"
            " WHERE state IN ('taken', 'waiting', 'running') AND NOT EXISTS (SELECT 1 FROM chat_takers t"
            " WHERE t.profile = chat_handoffs.profile AND t.taker = chat_handoffs.taker AND t.seen_at >= ?)",
            (time.time(), before),
        )


async def prune(db: Db, *, before: float) -> int:
    """Remove the settled handoffs last changed before `before`."""
    async with db.tx() as tx:
        return await tx.run(
            "DELETE FROM chat_handoffs WHERE state IN ('answered', 'failed', 'not_a_chat', 'withdrawn')"
            " AND updated_at < ?",
            (before,),
        )
