"""The ledger (read side): every run, refusal and message sent to a peer between two addresses, newest first."""

from __future__ import annotations

from typing import Any

from ..outcome import Consumed
from ..records import LedgerEntry
from .driver import Db, Row

NO_SPEND = ", 0 AS tokens_in, 0 AS tokens_out, 0.0 AS cost_usd"  # a refusal or a message to a peer: nothing here
RUN_TIMES = ", started_at, finished_at, consumed, deadline"
# Typed: each part of the ledger's union is a query of its own, where PostgreSQL takes a bare NULL for text.
NO_TIME = "CAST(NULL AS DOUBLE PRECISION)"
NO_CONSUMED = ", CAST(NULL AS TEXT) AS consumed"  # a refusal (no model was to read it), a message to a peer
NO_TIMES = f", {NO_TIME} AS started_at, {NO_TIME} AS finished_at{NO_CONSUMED}, {NO_TIME} AS deadline"
PEER_TIMES = (  # a message to a peer ended when its outcome was known: its record's last change
    f", {NO_TIME} AS started_at,"
    f" CASE WHEN state IN ('delivered', 'failed', 'refused') THEN updated_at END AS finished_at{NO_CONSUMED},"
    f" {NO_TIME} AS deadline"
)


def _entry(row: Row) -> LedgerEntry:
    said = dict(row)
    return LedgerEntry(**{**said, "consumed": Consumed.of(said["consumed"])})


def _match(column: str) -> str:
    # An address matches itself and everything below it ("research" covers "research/<id>").
    return f"({column} = ? OR substr({column}, 1, length(?)) = ?)"


def _params(address: str) -> tuple[str, str, str]:
    return address, address + "/", address + "/"


async def entries(
    db: Db,
    a: str | None = None,
    b: str | None = None,
    *,
    limit: int = 100,
    since: float | None = None,
    profile: str | None = None,
    states: tuple[str, ...] = (),
) -> list[LedgerEntry]:
    """Newest first. One address: anything it sent or received; two: what passed between them. With
    `since`, only what was sent from then on; with `profile`, only what that profile's sessions received or sent;
    with `states`, only entries in those states (`refused`: every refusal)."""
    runs_target = "(profile || '/' || session_id)"
    clauses: dict[str, tuple[str, list[Any]]] = {}
    for table, sender, target in (
        ("runs", "sender", runs_target),
        ("refusals", "sender", "target"),
        ("outbound", "sender", "target"),
    ):
        if a is None:
            clauses[table] = ("TRUE", [])
        elif b is None:
            clauses[table] = (f"({_match(sender)} OR {_match(target)})", [*_params(a), *_params(a)])
        else:
            clauses[table] = (
                f"(({_match(sender)} AND {_match(target)}) OR ({_match(sender)} AND {_match(target)}))",
                [*_params(a), *_params(b), *_params(b), *_params(a)],
            )
    if since is not None:
        clauses = {
            table: (f"({where}) AND created_at >= ?", [*params, since]) for table, (where, params) in clauses.items()
        }
    if profile is not None:
        own = {
            "runs": ("(profile = ? OR sender_profile = ?)", [profile, profile]),
            "refusals": (f"({_match('sender')} OR {_match('target')})", [*_params(profile), *_params(profile)]),
            "outbound": ("sender_profile = ?", [profile]),
        }
        for table, (where, params) in own.items():
            clauses[table] = (f"{clauses[table][0]} AND {where}", [*clauses[table][1], *params])
    wanted = [s for s in states if s != "refused"]
    if states:  # a run or a message to a peer in a wanted state; a refusal when `refused` is asked for
        marks = ", ".join("?" for _ in wanted)
        for table in ("runs", "outbound"):
            where, params = clauses[table]
            clauses[table] = (f"{where} AND state IN ({marks})", [*params, *wanted]) if wanted else ("FALSE", [])
        if "refused" not in states:
            clauses["refusals"] = ("FALSE", [])
    run_where, run_params = clauses["runs"]
    ref_where, ref_params = clauses["refusals"]
    out_where, out_params = clauses["outbound"]
    # Each part newest first and cut at `limit` on its own (an index on created_at walked backwards), then the
    # three merged: a page reads `limit` rows of each table, however many the store holds.
    newest = "ORDER BY created_at DESC LIMIT ?"
    rows = await db.all(
        "SELECT * FROM ("
        f"SELECT created_at AS at, sender, {runs_target} AS target, state, hops, wait_seconds, message, reply,"
        " id AS run_id, error AS reason, origin, 'run' AS kind, tokens_in, tokens_out, cost_usd"
        f"{RUN_TIMES} FROM runs WHERE {run_where} {newest}"
        ") AS r UNION ALL SELECT * FROM ("
        "SELECT created_at AS at, sender, target, 'refused:' || code AS state, hops, wait_seconds, message,"
        f" NULL AS reply, NULL AS run_id, reason, NULL AS origin, 'refusal' AS kind{NO_SPEND}{NO_TIMES} FROM refusals"
        f" WHERE {ref_where} {newest}"
        ") AS f UNION ALL SELECT * FROM ("
        "SELECT created_at AS at, sender, target, state, hops, wait_seconds, message, reply,"
        f" remote_run_id AS run_id, error AS reason, origin, 'peer' AS kind{NO_SPEND}{PEER_TIMES} FROM outbound"
        f" WHERE {out_where} {newest}"
        ") AS o ORDER BY at DESC LIMIT ?",
        (*run_params, limit, *ref_params, limit, *out_params, limit, limit),
    )
    return [_entry(r) for r in rows]


async def exchange(db: Db, origin: str) -> list[LedgerEntry]:
    """The exchange that followed from one person's message (the run `origin`), in the order it was sent:
    the runs here and the messages sent to peers."""
    # The run that began the exchange found by its id, the others on the origin index (which leaves out a
    # person's message at hop 0, the commonest run); `created_at + 0`: sorted once they are found, never by
    # walking every run in created_at order (what a planner picks to spare itself the sort).
    run_columns = (
        "SELECT created_at + 0 AS at, sender, (profile || '/' || session_id) AS target, state, hops, wait_seconds,"
        " message, reply, id AS run_id, error AS reason, origin, 'run' AS kind, tokens_in, tokens_out, cost_usd"
        f"{RUN_TIMES} FROM runs"
    )
    rows = await db.all(
        f"{run_columns} WHERE id = ? AND origin = id AND hops = 0"
        " UNION ALL "
        f"{run_columns} WHERE origin = ? AND (hops > 0 OR id <> origin)"
        " UNION ALL "
        "SELECT created_at + 0 AS at, sender, target, state, hops, wait_seconds, message, reply,"
        f" remote_run_id AS run_id, error AS reason, origin, 'peer' AS kind{NO_SPEND}{PEER_TIMES} FROM outbound"
        " WHERE origin = ?"
        " ORDER BY at",
        (origin, origin, origin),
    )
    return [_entry(r) for r in rows]
