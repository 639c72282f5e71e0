"""The ledger: every run and every refusal between two addresses, for a person to read."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from .db import Database


@dataclass(frozen=True)
class Entry:
    at: float
    sender: str
    target: str
    state: str  # a run state, or "refused:<code>"
    hops: int
    wait_seconds: float | None
    message: str
    reply: str | None
    run_id: str | None
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def record_refusal(
    db: Database, *, sender: str, target: str, code: str, reason: str, message: str, hops: int, wait: float | None
) -> None:
    with db.tx() as conn:
        conn.execute(
            "INSERT INTO refusals (sender, target, code, reason, message, hops, wait_seconds, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (sender, target, code, reason, message, hops, wait, time.time()),
        )


def _match(column: str) -> str:
    # An address matches itself and everything below it ("research" covers "research/<id>").
    return f"({column} = ? OR substr({column}, 1, length(?)) = ?)"


def _params(address: str) -> tuple[str, str, str]:
    return address, address + "/", address + "/"


def entries(db: Database, a: str | None = None, b: str | None = None, *, limit: int = 100) -> list[Entry]:
    """Newest first. One address: anything it sent or received; two: what passed between them."""
    runs_target = "(profile || '/' || session_id)"
    clauses: dict[str, tuple[str, list[str]]] = {}
    for table, sender, target in (
        ("runs", "sender", runs_target),
        ("refusals", "sender", "target"),
        ("outbound", "sender", "target"),
    ):
        if a is None:
            clauses[table] = ("1", [])
        elif b is None:
            clauses[table] = (f"({_match(sender)} OR {_match(target)})", [*_params(a), *_params(a)])
        else:
            clauses[table] = (
                f"(({_match(sender)} AND {_match(target)}) OR ({_match(sender)} AND {_match(target)}))",
                [*_params(a), *_params(b), *_params(b), *_params(a)],
            )
    run_where, run_params = clauses["runs"]
    ref_where, ref_params = clauses["refusals"]
    out_where, out_params = clauses["outbound"]
    rows = db.all(
        f"SELECT created_at AS at, sender, {runs_target} AS target, state, hops, wait_seconds, message, reply,"
        f" id AS run_id, error AS reason FROM runs WHERE {run_where}"
        " UNION ALL "
        "SELECT created_at AS at, sender, target, 'refused:' || code AS state, hops, wait_seconds, message,"
        f" NULL AS reply, NULL AS run_id, reason FROM refusals WHERE {ref_where}"
        " UNION ALL "
        "SELECT created_at AS at, sender, target, state, hops, wait_seconds, message, reply,"
        f" remote_run_id AS run_id, error AS reason FROM outbound WHERE {out_where}"
        " ORDER BY at DESC LIMIT ?",
        (*run_params, *ref_params, *out_params, limit),
    )
    return [Entry(**dict(r)) for r in rows]


@dataclass(frozen=True)
class Outbound:
    id: int
    sender: str
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
    remote_run_id: str | None


def record_outbound(
    db: Database,
    *,
    sender: str,
    sender_profile: str | None,
    sender_session: str | None,
    origin: str | None,
    target: str,
    peer: str,
    agent: str | None,
    message: str,
    hops: int,
    wait: float | None,
) -> int:
    now = time.time()
    with db.tx() as conn:
        cur = conn.execute(
            "INSERT INTO outbound (sender, sender_profile, sender_session, origin, target, peer, agent, message, hops,"
            " wait_seconds, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'sending', ?, ?)",
            (sender, sender_profile, sender_session, origin, target, peer, agent, message, hops, wait, now, now),
        )
    return int(cur.lastrowid or 0)


def update_outbound(
    db: Database,
    row_id: int,
    *,
    state: str,
    reply: str | None = None,
    error: str | None = None,
    key: str | None = None,
    remote_session_id: str | None = None,
    remote_run_id: str | None = None,
    wake: bool | None = None,
) -> None:
    with db.tx() as conn:
        conn.execute(
            "UPDATE outbound SET state = ?, reply = COALESCE(?, reply), error = COALESCE(?, error),"
            " idempotency_key = COALESCE(?, idempotency_key), remote_session_id = COALESCE(?, remote_session_id),"
            " remote_run_id = COALESCE(?, remote_run_id), wake = COALESCE(?, wake), updated_at = ? WHERE id = ?",
            (
                state,
                reply,
                error,
                key,
                remote_session_id,
                remote_run_id,
                None if wake is None else int(wake),
                time.time(),
                row_id,
            ),
        )


def awaiting_replies(db: Database) -> list[Outbound]:
    """Outbound messages answered with a receipt whose sender wants the reply when it comes."""
    rows = db.all(
        "SELECT id, sender, sender_session, origin, target, peer, agent, message, hops, state, reply, error,"
        " remote_run_id FROM outbound WHERE wake = 1 AND state = 'receipt' AND remote_run_id IS NOT NULL"
    )
    return [Outbound(**dict(r)) for r in rows]


def outbound_count(db: Database, *, sender_profile: str, target: str, origin: str, since: float) -> int:
    row = db.one(
        "SELECT COUNT(*) FROM outbound WHERE sender_profile = ? AND target = ? AND origin = ? AND created_at >= ?",
        (sender_profile, target, origin, since),
    )
    return int(row[0]) if row else 0


def settle_outbound(
    db: Database, *, peer: str, remote_run_id: str, state: str, reply: str | None, error: str | None
) -> None:
    """Record the end of a message sent to a peer, once it is known (a followed receipt or run)."""
    with db.tx() as conn:
        conn.execute(
            "UPDATE outbound SET state = ?, reply = COALESCE(?, reply), error = COALESCE(?, error), updated_at = ?"
            " WHERE peer = ? AND remote_run_id = ? AND state IN ('receipt', 'started', 'sending')",
            (state, reply, error, time.time(), peer, remote_run_id),
        )


def find_outbound(db: Database, *, remote_run_id: str, sender_profile: str) -> Outbound | None:
    row = db.one(
        "SELECT id, sender, sender_session, origin, target, peer, agent, message, hops, state, reply, error,"
        " remote_run_id FROM outbound WHERE remote_run_id = ? AND sender_profile = ? ORDER BY id DESC LIMIT 1",
        (remote_run_id, sender_profile),
    )
    return Outbound(**dict(row)) if row is not None else None
