"""The ledger (read side): every run, refusal and message sent to a peer between two addresses, newest first."""

from __future__ import annotations

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


def _match(column: str) -> str:
    # An address matches itself and everything below it ("research" covers "research/<id>").
    return f"({column} = ? OR substr({column}, 1, length(?)) = ?)"


def _params(address: str) -> tuple[str, str, str]:
    return address, address + "/", address + "/"


def entries(
    db: Database, a: str | None = None, b: str | None = None, *, limit: int = 100, profile: str | None = None
) -> list[Entry]:
    """Newest first. One address: anything it sent or received; two: what passed between them. With
    `profile`, only what that profile's sessions received or sent."""
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
    if profile is not None:
        own = {
            "runs": ("(profile = ? OR sender_profile = ?)", [profile, profile]),
            "refusals": (f"({_match('sender')} OR {_match('target')})", [*_params(profile), *_params(profile)]),
            "outbound": ("sender_profile = ?", [profile]),
        }
        for table, (where, params) in own.items():
            clauses[table] = (f"{clauses[table][0]} AND {where}", [*clauses[table][1], *params])
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
