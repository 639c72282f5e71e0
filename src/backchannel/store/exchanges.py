"""What this gateway's own records say of its exchanges with peers: how far each reached, how much
arrived, and which of our sessions wait on which peer (or are waited on by it).

A peer's hop, chain and exchange headers are its word; these are ours. Senders are `peer:NAME/<profile>`,
messages to a peer name it as `peer`. A run or a message to a peer keeps its exchange as `origin`: the run
of the person's message it descends from, or the full `<gateway-id>:<id>` of an exchange begun elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable

from .. import addresses
from ..ids import exchange_here
from .driver import Db


def here(gateway_id: str, named: str) -> str:
    """The exchange a peer names, as our records keep it (`ids.exchange_here`)."""
    return exchange_here(gateway_id, named)


async def exchange_floor(db: Db, exchange: str) -> int:
    """The least hop a message of `exchange` can be at now, whichever peer sends it: the highest hop the
    exchange reached here (its arrivals and our own agents' sends in it), and one past the highest hop of
    ours that went to any peer in it."""
    ran = await db.one("SELECT MAX(hops) FROM runs WHERE origin = ? AND hops > 0", (exchange,))
    sent = await db.one("SELECT MAX(hops) FROM outbound WHERE origin = ?", (exchange,))
    floor = 0
    if ran is not None and ran[0] is not None:
        floor = int(ran[0])
    if sent is not None and sent[0] is not None:
        floor = max(floor, int(sent[0]) + 1)
    return floor


def _from_peer(db: Db, column: str = "sender") -> str:
    """`column` is the peer's (`_peer_params`): `peer:NAME` or `peer:NAME/<profile>` (a range of the index: '0'
    follows '/')."""
    return f"{db.dialect.starts_with(column, 'peer:')} AND ({column} = ? OR ({column} >= ? AND {column} < ?))"


def _peer_params(peer: str) -> tuple[str, str, str]:
    address = addresses.remote(peer)
    return address, f"{address}/", f"{address}0"


async def hop_floor(db: Db, peer: str, *, since: float) -> int:
    """The least hop a message from `peer` that names no exchange can be at now: the highest hop its
    messages reached here since `since`, and one past the highest hop of ours that went to it since then."""
    arrived = await db.one(
        f"SELECT MAX(hops) FROM runs WHERE {_from_peer(db)} AND created_at >= ?", (*_peer_params(peer), since)
    )
    sent = await db.one("SELECT MAX(hops) FROM outbound WHERE peer = ? AND created_at >= ?", (peer, since))
    floor = 0
    if arrived is not None and arrived[0] is not None:
        floor = int(arrived[0])
    if sent is not None and sent[0] is not None:
        floor = max(floor, int(sent[0]) + 1)
    return floor


async def arrivals(db: Db, peer: str, profile: str, *, since: float) -> int:
    """Messages from `peer` (any of its profiles) recorded for `profile` since a time, whatever their headers."""
    row = await db.one(
        f"SELECT COUNT(*) FROM runs WHERE {_from_peer(db)} AND created_at >= ? AND profile = ?",
        (*_peer_params(peer), since, profile),
    )
    return int(row[0]) if row else 0


async def sessions_waiting_on(db: Db, peer: str, *, now: float) -> list[str]:
    """Our sessions whose turn waits right now for an answer from `peer` (a synchronous message to it)."""
    rows = await db.all(
        "SELECT DISTINCT sender_session FROM outbound WHERE peer = ? AND state = 'sending' AND sender_session IS"
        " NOT NULL AND wait_seconds > 0 AND created_at + wait_seconds >= ?",
        (peer, now),
    )
    return [str(r[0]) for r in rows]


async def waited_on_by(db: Db, peer: str, sessions: Iterable[str], *, now: float) -> str | None:
    """One of `sessions` whose running turn `peer` waits for (it sent the message synchronously), or None."""
    wanted = list(dict.fromkeys(sessions))
    if not wanted:
        return None
    row = await db.one(
        f"SELECT session_id FROM runs WHERE {_from_peer(db)} AND state = 'running' AND wait_seconds > 0"
        f" AND created_at + wait_seconds >= ? AND session_id IN ({', '.join('?' for _ in wanted)}) LIMIT 1",
        (*_peer_params(peer), now, *wanted),
    )
    return str(row[0]) if row is not None else None
