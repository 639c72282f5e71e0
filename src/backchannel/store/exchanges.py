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
from .db import Database


def here(gateway_id: str, named: str) -> str:
    """The exchange a peer names, as our records keep it (`ids.exchange_here`)."""
    return exchange_here(gateway_id, named)


def exchange_floor(db: Database, exchange: str) -> int:
    """The least hop a message of `exchange` can be at now, whichever peer sends it: the highest hop the
    exchange reached here (its arrivals and our own agents' sends in it), and one past the highest hop of
    ours that went to any peer in it."""
    ran = db.one("SELECT MAX(hops) FROM runs WHERE origin = ? AND hops > 0", (exchange,))
    sent = db.one("SELECT MAX(hops) FROM outbound WHERE origin = ?", (exchange,))
    floor = 0
    if ran is not None and ran[0] is not None:
        floor = int(ran[0])
    if sent is not None and sent[0] is not None:
        floor = max(floor, int(sent[0]) + 1)
    return floor


def _from_peer(column: str = "sender") -> str:
    return f"{column} GLOB 'peer:*' AND ({column} = ? OR {column} GLOB ?)"


def _peer_params(peer: str) -> tuple[str, str]:
    return addresses.remote(peer), addresses.remote(peer, "*")


def hop_floor(db: Database, peer: str, *, since: float) -> int:
    """The least hop a message from `peer` that names no exchange can be at now: the highest hop its
    messages reached here since `since`, and one past the highest hop of ours that went to it since then."""
    arrived = db.one(
        f"SELECT MAX(hops) FROM runs WHERE {_from_peer()} AND created_at >= ?", (*_peer_params(peer), since)
    )
    sent = db.one("SELECT MAX(hops) FROM outbound WHERE peer = ? AND created_at >= ?", (peer, since))
    floor = 0
    if arrived is not None and arrived[0] is not None:
        floor = int(arrived[0])
    if sent is not None and sent[0] is not None:
        floor = max(floor, int(sent[0]) + 1)
    return floor


def arrivals(db: Database, peer: str, profile: str, *, since: float) -> int:
    """Messages from `peer` (any of its profiles) recorded for `profile` since a time, whatever their headers."""
    row = db.one(
        f"SELECT COUNT(*) FROM runs WHERE {_from_peer()} AND created_at >= ? AND profile = ?",
        (*_peer_params(peer), since, profile),
    )
    return int(row[0]) if row else 0


def sessions_waiting_on(db: Database, peer: str, *, now: float) -> list[str]:
    """Our sessions whose turn waits right now for an answer from `peer` (a synchronous message to it)."""
    rows = db.all(
        "SELECT DISTINCT sender_session FROM outbound WHERE peer = ? AND state = 'sending' AND sender_session IS"
        " NOT NULL AND wait_seconds > 0 AND created_at + wait_seconds >= ?",
        (peer, now),
    )
    return [str(r[0]) for r in rows]


def waited_on_by(db: Database, peer: str, sessions: Iterable[str], *, now: float) -> str | None:
    """One of `sessions` whose running turn `peer` waits for (it sent the message synchronously), or None."""
    wanted = list(dict.fromkeys(sessions))
    if not wanted:
        return None
    row = db.one(
        f"SELECT session_id FROM runs WHERE {_from_peer()} AND state = 'running' AND wait_seconds > 0"
        f" AND created_at + wait_seconds >= ? AND session_id IN ({', '.join('?' for _ in wanted)}) LIMIT 1",
        (*_peer_params(peer), now, *wanted),
    )
    return str(row[0]) if row is not None else None
