"""Messages sent to other gateways: one row each, from `sending` to its known end, and the receipts to follow.

States are outcomes (`delivered`, `receipt`, `refused`, `failed`, `unknown`) plus `sending` (recorded,
no answer yet) and `started` (a run started with `peer run`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .driver import Db, Row

_COLUMNS = (
    "id, sender, sender_profile, sender_session, origin, target, peer, agent, message, hops, state, reply, error,"
    " idempotency_key, remote_session_id, remote_run_id, wake, traceparent, tracestate"
)


@dataclass(frozen=True)
class Outbound:
    id: int
    sender: str
    sender_profile: str | None
    sender_session: str | None
    origin: str | None
    target: str
    peer: str
    agent: str | None
    message: str
    hops: int
    state: str
    reply: str | None
    error: str | None
    idempotency_key: str | None
    remote_session_id: str | None
    remote_run_id: str | None
    wake: bool
    traceparent: str | None = None  # the span that sent it (W3C): the wake-up of its late reply continues it
    tracestate: str | None = None


def _row(row: Row) -> Outbound:
    return Outbound(**{**dict(row), "wake": bool(row["wake"])})


@dataclass(frozen=True)
class NewOutbound:
    sender: str
    target: str
    peer: str
    agent: str | None
    message: str
    idempotency_key: str
    hops: int = 0
    wait: float | None = None
    sender_profile: str | None = None  # set when an agent session sends
    sender_session: str | None = None
    origin: str | None = None  # the exchange (a person's message) the send descends from
    traceparent: str | None = None
    tracestate: str | None = None


async def record(db: Db, new: NewOutbound) -> Outbound:
    """A new row in state `sending`, or the row already filed under the same key (a retried send)."""
    existing = await by_key(db, new.idempotency_key)
    if existing is not None:
        return existing
    now = time.time()
    async with db.tx() as tx:
        row = await tx.one(
            "INSERT INTO outbound (sender, sender_profile, sender_session, origin, target, peer, agent, message, hops,"
            " wait_seconds, state, idempotency_key, created_at, updated_at, traceparent, tracestate)"
            f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'sending', ?, ?, ?, ?, ?) RETURNING {_COLUMNS}",
            (
                new.sender,
                new.sender_profile,
                new.sender_session,
                new.origin,
                new.target,
                new.peer,
                new.agent,
                new.message,
                new.hops,
                new.wait,
                new.idempotency_key,
                now,
                now,
                new.traceparent,
                new.tracestate,
            ),
        )
    assert row is not None  # INSERT … RETURNING gives the row it wrote
    return _row(row)


async def update(
    db: Db,
    row_id: int,
    *,
    state: str,
    reply: str | None = None,
    error: str | None = None,
    remote_session_id: str | None = None,
    remote_run_id: str | None = None,
    wake: bool | None = None,
) -> None:
    async with db.tx() as tx:
        await tx.run(
            "UPDATE outbound SET state = ?, reply = COALESCE(?, reply), error = COALESCE(?, error),"
            " remote_session_id = COALESCE(?, remote_session_id), remote_run_id = COALESCE(?, remote_run_id),"
            " wake = COALESCE(?, wake), updated_at = ? WHERE id = ?",
            (
                state,
                reply,
                error,
                remote_session_id,
                remote_run_id,
                None if wake is None else int(wake),
                time.time(),
                row_id,
            ),
        )


async def settle(db: Db, row_id: int, *, state: str, reply: str | None, error: str | None) -> bool:
    """Record the known end of a message still pending; False when it was already settled."""
    async with db.tx() as tx:
        changed = await tx.run(
            "UPDATE outbound SET state = ?, reply = COALESCE(?, reply), error = COALESCE(?, error), wake = 0,"
            " updated_at = ? WHERE id = ? AND state IN ('receipt', 'started', 'sending', 'unknown')",
            (state, reply, error, time.time(), row_id),
        )
    return changed == 1


async def by_key(db: Db, key: str) -> Outbound | None:
    row = await db.one(f"SELECT {_COLUMNS} FROM outbound WHERE idempotency_key = ? ORDER BY id LIMIT 1", (key,))
    return _row(row) if row is not None else None


async def by_remote_run(db: Db, peer: str, remote_run_id: str) -> Outbound | None:
    """The message that started run `remote_run_id` on `peer` (as that peer named it), newest first."""
    row = await db.one(
        f"SELECT {_COLUMNS} FROM outbound WHERE peer = ? AND remote_run_id = ? ORDER BY id DESC LIMIT 1",
        (peer, remote_run_id),
    )
    return _row(row) if row is not None else None


async def sent_by(db: Db, sender_profile: str, remote_run_id: str) -> Outbound | None:
    """The message a profile sent that a peer's run `remote_run_id` handles (for that agent's check_message)."""
    row = await db.one(
        f"SELECT {_COLUMNS} FROM outbound WHERE remote_run_id = ? AND sender_profile = ? ORDER BY id DESC LIMIT 1",
        (remote_run_id, sender_profile),
    )
    return _row(row) if row is not None else None


async def awaiting_replies(db: Db) -> list[Outbound]:
    """Messages answered with a receipt whose sender (an agent's session) wants the reply when it comes."""
    rows = await db.all(
        f"SELECT {_COLUMNS} FROM outbound WHERE wake = 1 AND state = 'receipt' AND remote_run_id IS NOT NULL"
    )
    return [_row(r) for r in rows]


async def count(db: Db, *, sender_profile: str, target: str, origin: str, since: float) -> int:
    """Messages one profile sent to one remote target within one exchange since a time (the pair budget)."""
    row = await db.one(
        "SELECT COUNT(*) FROM outbound WHERE sender_profile = ? AND target = ? AND origin = ? AND created_at >= ?",
        (sender_profile, target, origin, since),
    )
    return int(row[0]) if row else 0
