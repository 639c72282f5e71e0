"""Durable run queue: record (idempotently), claim, finish with the reply, cancel, expire, reclaim.

Every transition is one guarded UPDATE that reports whether it happened.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import keys
from ..errors import Conflict, LimitReached, NotFound
from ..ids import new_run_id
from ..messages import Attachment, Message
from ..states import RunState as RunState  # the store records the states; it re-exports them for its callers
from .db import Database
from .sessions import append_messages

QUEUE_FULL_RETRY_SECONDS = 2.0


@dataclass(frozen=True)
class RunRow:
    id: str
    seq: int
    idempotency_key: str
    sender: str
    profile: str
    session_id: str
    message: str
    hops: int
    chain: tuple[str, ...]
    state: RunState
    reply: str | None
    error: str | None
    error_code: str | None
    attempts: int
    created_at: float
    updated_at: float
    started_at: float | None
    finished_at: float | None
    expires_at: float | None
    origin: str | None = None
    sender_profile: str | None = None
    sender_session: str | None = None
    wait_seconds: float | None = None
    wake: bool = False

    @property
    def given_key(self) -> str:
        """The idempotency key as its sender gave it (a peer's is filed under its sender)."""
        return keys.given(self.idempotency_key)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.id,
            "state": self.state.value,
            "sender": self.sender,
            "profile": self.profile,
            "session_id": self.session_id,
            "message": self.message,
            "hops": self.hops,
            "chain": list(self.chain),
            "reply": self.reply,
            "error": self.error,
            "error_code": self.error_code,
            "attempts": self.attempts,
            "idempotency_key": self.given_key,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "origin": self.origin,
            "sender_session": self.sender_session,
            "wait_seconds": self.wait_seconds,
        }


def _run(row: sqlite3.Row) -> RunRow:
    return RunRow(
        id=row["id"],
        seq=row["seq"],
        idempotency_key=row["idempotency_key"],
        sender=row["sender"],
        profile=row["profile"],
        session_id=row["session_id"],
        message=row["message"],
        hops=row["hops"],
        chain=tuple(json.loads(row["chain"])),
        state=RunState(row["state"]),
        reply=row["reply"],
        error=row["error"],
        error_code=row["error_code"],
        attempts=row["attempts"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        expires_at=row["expires_at"],
        origin=row["origin"],
        sender_profile=row["sender_profile"],
        sender_session=row["sender_session"],
        wait_seconds=row["wait_seconds"],
        wake=bool(row["wake"]),
    )


@dataclass(frozen=True)
class NewRun:
    """A run to record. Without an idempotency key, the same sender, target and text within the dedup
    window is the same run (unless that run failed: then the words are a new attempt)."""

    sender: str
    profile: str
    session_id: str
    message: str
    idempotency_key: str | None
    hops: int = 0
    chain: tuple[str, ...] = ()
    ttl_seconds: float | None = None
    origin: str | None = None  # the run of the person's message this exchange descends from
    sender_profile: str | None = None  # set when an agent session sends
    sender_session: str | None = None
    wait_seconds: float | None = None
    wake: bool = False  # deliver the reply into the sender's session when it comes
    held: bool = False  # recorded `held` (a hold rule): it waits for the person; `ttl_seconds` is its hold expiry
    files: tuple[Attachment, ...] = ()  # what the message came with, written with the run


def record(
    db: Database,
    new: NewRun,
    *,
    claim_for: str | None = None,
    now: float | None = None,
    lease_seconds: float = 30.0,
    dedup_window: float = 900.0,
    ttl_seconds: float | None = None,
    max_queued: int | None = None,
    admit: Callable[[], None] | None = None,
) -> tuple[RunRow, bool]:
    """Insert a queued run, or return the run already filed under the same key (created=False).

    A new run (never a replay) is refused with LimitReached when its session already has `max_queued`
    runs waiting, or when `admit` raises (a sender's rate); nothing is written then.

    With `claim_for`, a run whose session has nothing queued or running is recorded already claimed
    by that owner (`running`): one transaction instead of two on the common path. The run expires
    after `new.ttl_seconds`, or else `ttl_seconds`, in the queue. `now`: the time it is recorded at (default:
    the clock's).
    """
    now = time.time() if now is None else now
    ttl = new.ttl_seconds or ttl_seconds
    fp = keys.fingerprint(new.sender, new.session_id, new.message)
    run_id = new_run_id()
    key = new.idempotency_key
    with db.tx() as conn:
        if key is None:
            recent = conn.execute(
                "SELECT * FROM runs WHERE fingerprint = ? AND idempotency_key GLOB 'dedup:*' AND created_at >= ?"
                " AND state NOT IN ('failed', 'cancelled', 'expired') ORDER BY seq DESC LIMIT 1",
                (fp, now - dedup_window),
            ).fetchone()
            if recent is not None:
                return _run(recent), False
            key = keys.dedup(fp, run_id)
        elif admit is not None and (
            known := conn.execute("SELECT * FROM runs WHERE idempotency_key = ?", (key,)).fetchone()
        ):
            max_queued = admit = None  # a replay: it is answered with its run, whatever the limits say now
            if known["fingerprint"] == fp:
                return _run(known), False
        # One read for the queue cap and the claim: how many of the session's runs wait, and whether one runs.
        waiting, running = (
            conn.execute(
                "SELECT COALESCE(SUM(state = 'queued'), 0), COALESCE(SUM(state = 'running'), 0) FROM runs"
                " WHERE session_id = ? AND state IN ('queued', 'running')",
                (new.session_id,),
            ).fetchone()
            if max_queued or claim_for is not None
            else (0, 0)
        )
        if (
            max_queued
            and waiting >= max_queued
            and (key is None or conn.execute("SELECT 1 FROM runs WHERE idempotency_key = ?", (key,)).fetchone() is None)
        ):  # a replay (its key known) is answered with its run below, whatever the limits say now
            raise LimitReached(
                f"session {new.session_id!r} already has {waiting} message{'' if waiting == 1 else 's'} waiting "
                f"(gateway.max_queued_per_session is {max_queued}); try again once it has answered some",
                code="queue_full",
                retry_after=QUEUE_FULL_RETRY_SECONDS,
            )
        if admit is not None:
            admit()
        claimed = claim_for is not None and not new.held and not (waiting or running)
        cur = conn.execute(
            "INSERT INTO runs (id, idempotency_key, fingerprint, sender, profile, session_id, message, hops, chain,"
            " state, created_at, updated_at, expires_at, origin, sender_profile, sender_session, wait_seconds, wake,"
            " owner, lease_until, attempts, started_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (idempotency_key) DO NOTHING RETURNING *",
            (
                run_id,
                key,
                fp,
                new.sender,
                new.profile,
                new.session_id,
                new.message,
                new.hops,
                json.dumps(list(new.chain)),
                (RunState.HELD if new.held else RunState.RUNNING if claimed else RunState.QUEUED).value,
                now,
                now,
                now + ttl if ttl else None,
                new.origin or run_id,  # a person's message starts its own exchange
                new.sender_profile,
                new.sender_session,
                new.wait_seconds,
                int(new.wake),
                claim_for if claimed else None,
                now + lease_seconds if claimed else None,
                1 if claimed else 0,
                now if claimed else None,
            ),
        )
        row = cur.fetchone()
        created = row is not None
        if row is None:
            row = conn.execute("SELECT * FROM runs WHERE idempotency_key = ?", (key,)).fetchone()
        elif new.files:
            conn.executemany(
                "INSERT INTO run_files (run_id, ordinal, name, media_type, url, content, size)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(run_id, n, f.name, f.media_type, f.url, f.content, f.size) for n, f in enumerate(new.files)],
            )
    if not created and row["fingerprint"] != fp:
        raise Conflict(
            f"idempotency key {keys.given(key)!r} was already used for a different message or target (run {row['id']})",
            code="idempotency_key_conflict",
        )
    return _run(row), created


def files_of(db: Database, run_ids: list[str]) -> dict[str, list[Attachment]]:
    """The files each of the runs came with, in the order they were sent (runs without any left out)."""
    unique = sorted(set(run_ids))
    if not unique:
        return {}
    marks = ", ".join("?" for _ in unique)
    found: dict[str, list[Attachment]] = {}
    for r in db.all(
        f"SELECT run_id, name, media_type, url, content FROM run_files WHERE run_id IN ({marks})"
        " ORDER BY run_id, ordinal",
        unique,
    ):
        found.setdefault(r["run_id"], []).append(Attachment(r["name"], r["media_type"], r["content"], r["url"]))
    return found


def get(db: Database, run_id: str) -> RunRow:
    row = db.one("SELECT * FROM runs WHERE id = ?", (run_id,))
    if row is None:
        raise NotFound(f"no run {run_id!r}", code="run_not_found")
    return _run(row)


def by_key(db: Database, key: str) -> RunRow | None:
    """The run filed under an idempotency key, if any."""
    row = db.one("SELECT * FROM runs WHERE idempotency_key = ?", (key,))
    return _run(row) if row is not None else None


def queue_position(db: Database, run: RunRow) -> int | None:
    """1-based place among the queued runs of the run's session; None when it is not queued."""
    if run.state is not RunState.QUEUED:
        return None
    row = db.one(
        "SELECT COUNT(*) FROM runs WHERE session_id = ? AND state = 'queued' AND seq <= ?",
        (run.session_id, run.seq),
    )
    return int(row[0]) if row else None


def runs_ahead(db: Database, run: RunRow) -> int:
    """How many runs of the run's session go before it: the one running and those queued earlier (0 when
    it is not queued)."""
    if run.state is not RunState.QUEUED:
        return 0
    row = db.one(
        "SELECT COUNT(*) FROM runs WHERE session_id = ? AND (state = 'running' OR (state = 'queued' AND seq < ?))",
        (run.session_id, run.seq),
    )
    return int(row[0]) if row else 0


def has_queued(db: Database, session_id: str) -> bool:
    """Whether the session has a queued run (a read: no write transaction)."""
    return db.one("SELECT 1 FROM runs WHERE session_id = ? AND state = 'queued' LIMIT 1", (session_id,)) is not None


def claim_next(
    db: Database, session_id: str, *, owner: str, lease_seconds: float
) -> tuple[RunRow | None, list[RunRow]]:
    """Take the oldest queued run of a session, unless one of its runs is running (in any process).

    Returns (the claimed run or None, the runs that expired in the queue on the way). Ask `has_queued`
    first: the common case after a turn needs no write transaction."""
    expired: list[RunRow] = []
    now = time.time()
    with db.tx() as conn:
        if conn.execute("SELECT 1 FROM runs WHERE session_id = ? AND state = 'running'", (session_id,)).fetchone():
            return None, expired
        while True:
            row = conn.execute(
                "SELECT * FROM runs WHERE session_id = ? AND state = 'queued' ORDER BY seq LIMIT 1", (session_id,)
            ).fetchone()
            if row is None:
                return None, expired
            if row["expires_at"] is not None and row["expires_at"] < now:
                gone = conn.execute(
                    "UPDATE runs SET state = 'expired', error = ?, error_code = 'expired', updated_at = ?,"
                    " finished_at = ? WHERE seq = ? RETURNING *",
                    (f"expired after waiting {now - row['created_at']:.0f}s in the queue", now, now, row["seq"]),
                ).fetchone()
                expired.append(_run(gone))
                continue
            updated = conn.execute(
                "UPDATE runs SET state = 'running', attempts = attempts + 1, owner = ?, lease_until = ?,"
                " started_at = ?, updated_at = ? WHERE seq = ? AND state = 'queued' RETURNING *",
                (owner, now + lease_seconds, now, now, row["seq"]),
            ).fetchone()
            return _run(updated), expired


def unclaim(db: Database, run_id: str, *, owner: str) -> RunRow | None:
    """Put a run this owner claimed back in the queue before its turn began (the claim does not count as
    an attempt). None when it was not ours any more."""
    with db.tx() as conn:
        row = conn.execute(
            "UPDATE runs SET state = 'queued', attempts = MAX(attempts - 1, 0), owner = NULL, lease_until = NULL,"
            " started_at = NULL, updated_at = ? WHERE id = ? AND state = 'running' AND owner = ? RETURNING *",
            (time.time(), run_id, owner),
        ).fetchone()
    return _run(row) if row is not None else None


def expire_due(db: Database, profile: str) -> list[RunRow]:
    """Expire the profile's queued runs past their TTL (as `claim_next` would, for a queue nobody claims from)."""
    now = time.time()
    with db.tx() as conn:
        rows = conn.execute(
            "UPDATE runs SET state = 'expired', error = 'expired after waiting ' || CAST(ROUND(? - created_at) AS"
            " INTEGER) || 's in the queue', error_code = 'expired', updated_at = ?, finished_at = ?"
            " WHERE profile = ? AND state = 'queued' AND expires_at IS NOT NULL AND expires_at < ? RETURNING *",
            (now, now, now, profile, now),
        ).fetchall()
    return [_run(r) for r in rows]


def renew_leases(db: Database, run_ids: list[str], *, owner: str, lease_seconds: float) -> None:
    if not run_ids:
        return
    until = time.time() + lease_seconds
    with db.tx() as conn:
        conn.executemany(
            "UPDATE runs SET lease_until = ? WHERE id = ? AND owner = ? AND state = 'running'",
            [(until, rid, owner) for rid in run_ids],
        )


def finish(
    db: Database,
    run_id: str,
    *,
    owner: str,
    state: RunState,
    reply: str | None = None,
    error: str | None = None,
    error_code: str | None = None,
    messages: list[Message] | None = None,
) -> RunRow | None:
    """End a running run that this owner holds; its messages and its state commit together.

    Returns the finished run, or None when it was not ours to finish (lease lost)."""
    now = time.time()
    with db.tx() as conn:
        row = conn.execute(
            "UPDATE runs SET state = ?, reply = ?, error = ?, error_code = ?, owner = NULL, lease_until = NULL,"
            " updated_at = ?, finished_at = ? WHERE id = ? AND state = 'running' AND owner = ? RETURNING *",
            (state.value, reply, error, error_code, now, now, run_id, owner),
        ).fetchone()
        if row is None:
            return None
        if messages:
            append_messages(conn, row["session_id"], messages, run_id=run_id)
    return _run(row)


def cancel_waiting(db: Database, run_id: str) -> RunRow | None:
    """Cancel a run that has not begun: queued, or held for the person; None when it is neither (any more)."""
    now = time.time()
    with db.tx() as conn:
        row = conn.execute(
            "UPDATE runs SET state = 'cancelled', error = CASE state WHEN 'held' THEN"
            " 'cancelled while held for the person, before it started' ELSE 'cancelled before it started' END,"
            " error_code = 'cancelled', updated_at = ?, finished_at = ? WHERE id = ? AND state IN ('queued', 'held')"
            " RETURNING *",
            (now, now, run_id),
        ).fetchone()
    return _run(row) if row is not None else None


def reclaim(
    db: Database, *, is_dead: Callable[[str], bool], max_attempts: int, keep: set[str] | frozenset[str] = frozenset()
) -> list[RunRow]:
    """Requeue runs left `running` by a dead owner or an expired lease (except the runs in `keep`, which
    their live owner still holds); past max_attempts they fail. Returns the runs as they now are."""
    now = time.time()
    changed: list[RunRow] = []
    with db.tx() as conn:
        rows = conn.execute("SELECT * FROM runs WHERE state = 'running'").fetchall()
        stale = [
            r for r in rows if r["id"] not in keep and ((r["lease_until"] or 0) < now or is_dead(r["owner"] or ""))
        ]
        for r in stale:
            if r["attempts"] >= max_attempts:
                row = conn.execute(
                    "UPDATE runs SET state = 'failed', error = ?, error_code = 'interrupted', owner = NULL,"
                    " updated_at = ?, finished_at = ? WHERE seq = ? AND state = 'running' RETURNING *",
                    (f"interrupted {r['attempts']} times by a gateway stop; not retried", now, now, r["seq"]),
                ).fetchone()
            else:
                row = conn.execute(
                    "UPDATE runs SET state = 'queued', owner = NULL, lease_until = NULL, updated_at = ?"
                    " WHERE seq = ? AND state = 'running' RETURNING *",
                    (now, r["seq"]),
                ).fetchone()
            if row is not None:
                changed.append(_run(row))
    return changed


def ask_wake(db: Database, run_id: str) -> bool:
    """The sender stopped waiting: deliver the reply into its session when it comes. False if already over."""
    with db.tx() as conn:
        cur = conn.execute(
            "UPDATE runs SET wake = 1 WHERE id = ? AND state IN ('held', 'queued', 'running')",
            (run_id,),
        )
    return cur.rowcount == 1


def pending_wakes(db: Database) -> list[RunRow]:
    """Finished runs whose sender asked to be woken and whose wake-up run does not exist yet."""
    rows = db.all(
        "SELECT r.* FROM runs r WHERE r.wake = 1 AND r.state NOT IN ('held', 'queued', 'running')"
        " AND NOT EXISTS (SELECT 1 FROM runs w WHERE w.idempotency_key = ? || r.id)",
        (keys.WAKE,),
    )
    return [_run(r) for r in rows]


def pair_count(db: Database, *, sender_profile: str, profile: str, origin: str, since: float) -> int:
    """Agent-sent runs from one profile to another within one exchange (one person's message) since a time."""
    row = db.one(
        "SELECT COUNT(*) FROM runs WHERE sender_profile = ? AND profile = ? AND origin = ? AND created_at >= ?",
        (sender_profile, profile, origin, since),
    )
    return int(row[0]) if row else 0


def count_by_state(db: Database, states: tuple[RunState, ...]) -> dict[RunState, int]:
    """How many runs of the home are in each of `states` (0 for none)."""
    placeholders = ", ".join("?" for _ in states)
    rows = db.all(
        f"SELECT state, COUNT(*) FROM runs WHERE state IN ({placeholders}) GROUP BY state",
        tuple(s.value for s in states),
    )
    counts = {state: 0 for state in states}
    counts.update({RunState(r[0]): int(r[1]) for r in rows})
    return counts


def profile_of_session(db: Database, session_id: str) -> str:
    row = db.one("SELECT profile FROM runs WHERE session_id = ? ORDER BY seq DESC LIMIT 1", (session_id,))
    if row is None:
        raise NotFound(f"no runs for session {session_id!r}", code="session_not_found")
    return str(row[0])


def sessions_with_queued(db: Database) -> list[str]:
    return [r[0] for r in db.all("SELECT DISTINCT session_id FROM runs WHERE state = 'queued'")]


def list_runs(
    db: Database,
    *,
    states: tuple[RunState, ...] = (),
    profile: str | None = None,
    session_id: str | None = None,
    limit: int = 50,
) -> list[RunRow]:
    """Runs, newest first; only those in `states` (any when empty), of `profile` and of `session_id` (any when
    None)."""
    clauses: list[str] = []
    params: list[Any] = []
    if states:
        clauses.append(f"state IN ({', '.join('?' for _ in states)})")
        params.extend(s.value for s in states)
    if profile is not None:
        clauses.append("profile = ?")
        params.append(profile)
    if session_id is not None:
        clauses.append("session_id = ?")
        params.append(session_id)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = db.all(f"SELECT * FROM runs {where} ORDER BY seq DESC LIMIT ?", (*params, limit))
    return [_run(r) for r in rows]


# --- holds -------------------------------------------------------------------------------------------


def held(db: Database, *, profile: str | None = None) -> list[RunRow]:
    """Messages waiting for the person, oldest first (of `profile` only, when given)."""
    where, params = ("AND profile = ?", (profile,)) if profile is not None else ("", ())
    return [_run(r) for r in db.all(f"SELECT * FROM runs WHERE state = 'held' {where} ORDER BY seq", params)]


def approve(db: Database, run_id: str, *, ttl_seconds: float | None) -> RunRow | None:
    """A held run queued (its queue TTL starts now); None when it is not held (any more)."""
    now = time.time()
    with db.tx() as conn:
        row = conn.execute(
            "UPDATE runs SET state = 'queued', updated_at = ?, expires_at = ? WHERE id = ? AND state = 'held'"
            " RETURNING *",
            (now, now + ttl_seconds if ttl_seconds else None, run_id),
        ).fetchone()
    return _run(row) if row is not None else None


def deny(db: Database, run_id: str, *, why: str) -> RunRow | None:
    """A held run refused by the person (`denied`); None when it is not held (any more)."""
    now = time.time()
    with db.tx() as conn:
        row = conn.execute(
            "UPDATE runs SET state = 'denied', error = ?, error_code = 'denied', updated_at = ?, finished_at = ?"
            " WHERE id = ? AND state = 'held' RETURNING *",
            (why, now, now, run_id),
        ).fetchone()
    return _run(row) if row is not None else None


def expire_held(db: Database) -> list[RunRow]:
    """Held runs past their hold expiry, expired (a read first: no write transaction when there are none, so
    an idle gateway stays idle and its WAL can be truncated)."""
    now = time.time()
    if not has_held_expired(db, now):
        return []
    with db.tx() as conn:
        rows = conn.execute(
            "UPDATE runs SET state = 'expired', error = 'held for the person ' || CAST(ROUND(? - created_at) AS"
            " INTEGER) || 's and not approved (hold_expiry_seconds)', error_code = 'hold_expired', updated_at = ?,"
            " finished_at = ? WHERE state = 'held' AND expires_at IS NOT NULL AND expires_at < ? RETURNING *",
            (now, now, now, now),
        ).fetchall()
    return [_run(r) for r in rows]


def has_held_expired(db: Database, now: float) -> bool:
    """Whether a held run is past its hold expiry (a read)."""
    found = db.one(
        "SELECT 1 FROM runs WHERE state = 'held' AND expires_at IS NOT NULL AND expires_at < ? LIMIT 1", (now,)
    )
    return found is not None


# --- A2A tasks -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskQuery:
    """Which of a caller's A2A runs in a profile to list: `sender`'s (with `sender_profiles`, also those from
    `sender/<profile>`); `after` is the (updated_at, seq) of the last one a previous page ended on; `since`
    keeps those updated at or after it."""

    profile: str
    sender: str
    sender_profiles: bool = False
    session_id: str | None = None
    states: tuple[RunState, ...] = ()
    since: float | None = None
    after: tuple[float, int] | None = None


def a2a_tasks(db: Database, query: TaskQuery, *, limit: int) -> tuple[list[RunRow], int]:
    """A page of the runs `query.sender` sent to `query.profile` over A2A, most recently updated first, and
    how many match in all (every page): both read through the runs_a2a_tasks index."""
    clauses = ["profile = ?", "idempotency_key GLOB 'a2a:*'"]
    params: list[Any] = [query.profile]
    if query.sender_profiles:  # "peer:alpha" and "peer:alpha/<profile>": a range of the index ('0' follows '/')
        family = f"{query.sender}/"
        clauses.append("sender >= ? AND sender < ? AND (sender = ? OR substr(sender, 1, ?) = ?)")
        params.extend((query.sender, f"{query.sender}0", query.sender, len(family), family))
    else:
        clauses.append("sender = ?")
        params.append(query.sender)
    if query.session_id is not None:
        clauses.append("session_id = ?")
        params.append(query.session_id)
    if query.states:
        clauses.append(f"state IN ({', '.join('?' for _ in query.states)})")
        params.extend(s.value for s in query.states)
    if query.since is not None:
        clauses.append("updated_at >= ?")
        params.append(query.since)
    where = " AND ".join(clauses)
    counted = db.one(f"SELECT COUNT(*) FROM runs WHERE {where}", params)
    total = int(counted[0]) if counted is not None else 0
    page_where, page_params = where, list(params)
    if query.after is not None:
        page_where += " AND (updated_at, seq) < (?, ?)"
        page_params.extend(query.after)
    rows = db.all(
        f"SELECT * FROM runs WHERE {page_where} ORDER BY updated_at DESC, seq DESC LIMIT ?",
        (*page_params, limit),
    )
    return [_run(r) for r in rows], total
