"""Durable run queue: record (idempotently), claim, finish with the reply, cancel, expire, reclaim.

Every transition is one guarded UPDATE that reports whether it happened. Each operation is written once for
both backends (`driver.Db`); where several gateways share a PostgreSQL store, the reads a write decides on lock
their rows (`Dialect.for_update`, `skip_locked`), a session has at most one running run (a unique index), and
a claim's fencing token (`fencing`, one more at each claim) guards every write of the turn that claimed it.

A session has one owning gateway at a time (`sessions.owner`, the mark it claims runs under): a claim (or a record
that claims) takes a session nobody owns, or whose owner is gone (`Db.gone`: its liveness lock is free), and moves
the session's `epoch` on; a session another live gateway owns is left to it (told by the notice). A run carries the
epoch it was claimed under (`runs.epoch`): every write of its turn is refused once its session's epoch moved on
(`CURRENT_EPOCH`), as a stale fencing token is. A gateway that stops gives its sessions up (`give_up`); a dead
one's are freed by the others' liveness check (`free_sessions`). SQLite has one gateway: every claim may take.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from .. import deadlines, keys
from ..errors import Conflict, LimitReached, NotFound
from ..ids import new_run_id
from ..messages import Attachment, Message
from ..outcome import Consumed
from ..records import Run, TaskQuery
from ..states import UNFINISHED
from ..states import RunState as RunState  # the store records the states; it re-exports them for its callers
from .driver import STEER_PREFIX, Db, Row, Tx, columns
from .sessions import append_messages, tool_calls_json

QUEUE_FULL_RETRY_SECONDS = 2.0
UNFINISHED_SQL = ", ".join(f"'{state.value}'" for state in UNFINISHED)  # every state a run is not finished in
# A session's queued runs in the order they run: by arrival, a run its person's answer put back after every run
# recorded before the answer (`resumed_after`), and before those recorded since.
IN_LINE = "COALESCE(resumed_after, seq), CASE WHEN resumed_after IS NULL THEN 0 ELSE 1 END, seq"
DEADLINE_PASSED = deadlines.CODE  # the code of a run its deadline ended
_LATE = "its deadline passed after waiting {:.0f}s in the queue: never started"
HUMAN = "human:"  # the person's senders begin so (`human:cli`, `human:api`, …): one caller, whatever the surface
Admit = Callable[[Tx], Awaitable[None]]  # a new run's last check, inside its transaction: raises to record nothing
# A write of a turn holds only while its session's epoch is the one its run was claimed under (`runs.epoch`).
CURRENT_EPOCH = "NOT EXISTS (SELECT 1 FROM sessions es WHERE es.id = runs.session_id AND es.epoch <> runs.epoch)"


def _run(row: Row) -> Run:
    r = columns(row)
    return Run(
        id=r["id"],
        seq=r["seq"],
        idempotency_key=r["idempotency_key"],
        sender=r["sender"],
        profile=r["profile"],
        session_id=r["session_id"],
        message=r["message"],
        hops=r["hops"],
        chain=tuple(json.loads(r["chain"])),
        # A steered message taken into a running turn is part of that turn: running, as the turn is.
        state=RunState.RUNNING if r["steered_into"] and r["state"] == "queued" else RunState(r["state"]),
        reply=r["reply"],
        error=r["error"],
        error_code=r["error_code"],
        attempts=r["attempts"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        started_at=r["started_at"],
        finished_at=r["finished_at"],
        expires_at=r["expires_at"],
        origin=r["origin"],
        sender_profile=r["sender_profile"],
        sender_session=r["sender_session"],
        wait_seconds=r["wait_seconds"],
        wake=bool(r["wake"]),
        fencing=r["fencing"],
        tokens_in=r["tokens_in"],
        tokens_out=r["tokens_out"],
        cost_usd=r["cost_usd"],
        landed=r["landed"],
        steered_into=r["steered_into"],
        traceparent=r["traceparent"],
        tracestate=r["tracestate"],
        trace_span=r["trace_span"],
        released_at=r["released_at"],
        resumed_after=r["resumed_after"],
        consumed=Consumed.of(r["consumed"]),
        deadline=r["deadline"],
    )


from_row = _run  # a run's row as the record (store.questions reads the runs it parks and resumes)


class Spent(NamedTuple):
    """What a turn's model calls used since it was last recorded: tokens read, written, and US dollars."""

    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0


NOTHING_SPENT = Spent()


@dataclass(frozen=True)
class NewRun:
    """A run to record. Without an idempotency key it is a new run, unless `retry_window` (a client's automatic
    retry, which cannot carry a key): then the same sender, target and text accepted within that many seconds (or
    still unfinished) is the same run, unless that run failed (then the words are a new attempt). `scope`: what its
    fingerprint names as the target (default its session; a request that makes a new session for each attempt names
    what the attempts share)."""

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
    steer: bool = False  # given to the session's running turn at its next model step, when one runs
    traceparent: str | None = None  # the trace it continues (W3C), None when nothing is traced
    tracestate: str | None = None
    scope: str | None = None
    retry_window: float = 0.0
    deadline: float | None = None  # when its sender stops waiting (backchannel.deadlines): past it, never started


async def record(
    db: Db,
    new: NewRun,
    *,
    claim_for: str | None = None,
    now: float | None = None,
    lease_seconds: float = 30.0,
    ttl_seconds: float | None = None,
    max_queued: int | None = None,
    admit: Admit | None = None,
) -> tuple[Run, bool]:
    """Insert a queued run, or return the run already filed under the same key (created=False).

    A new run (never a replay) is refused with LimitReached when its session already has `max_queued`
    runs waiting, or when `admit` raises (a sender's rate); nothing is written then.

    With `claim_for`, a run whose session has nothing queued or running is recorded already claimed
    by that owner (`running`): one transaction instead of two on the common path (on PostgreSQL one statement,
    `_record_in_one`, unless `admit`). The run expires
    after `new.ttl_seconds`, or else `ttl_seconds`, in the queue. `now`: the time it is recorded at (default:
    the clock's).
    """
    now = time.time() if now is None else now
    fp = keys.fingerprint(new.sender, new.scope or new.session_id, new.message)
    run_id = new_run_id()
    if db.dialect.writes_in_with and admit is None:  # one round trip (a sender's rate is checked in a transaction)
        return await _record_in_one(
            db,
            new,
            fp,
            run_id,
            claim_for=claim_for,
            now=now,
            lease_seconds=lease_seconds,
            ttl_seconds=ttl_seconds,
            max_queued=max_queued,
        )
    async with db.tx() as tx:
        # Records and claims of one session, from every gateway, one after another; who owns it, under which epoch.
        held_by = await tx.one(
            f"SELECT owner, epoch FROM sessions WHERE id = ?{db.dialect.for_update}", (new.session_id,)
        )
        filed, key, replay = await _filed(db, tx, new, fp, run_id, now, look=admit is not None)
        if filed is not None:
            return _run(filed), False
        if replay:
            max_queued = admit = None  # a replay: it is answered with its run, whatever the limits say now
        waiting, running, turn_sender = await _load(tx, new.session_id)
        if max_queued and waiting >= max_queued:
            await _over_cap(tx, new, key, waiting, max_queued)
        if admit is not None:
            await admit(tx)
        landed = _landed(new, waiting, running, turn_sender)
        started = max(now, time.time())  # the session seen free just now: `now` may be from before the wait
        claim = (claim_for, started) if claim_for is not None and landed == "started" and _in_time(new, now) else None
        epoch: int | None = 0
        if claim is not None and claim_for is not None:
            epoch = await _may_take(db, held_by, claim_for)  # None: another live gateway owns the session
            claim = claim if epoch is not None else None
        ttl = new.ttl_seconds or ttl_seconds
        row, created = await _insert(
            tx,
            new,
            run_id,
            key,
            fp,
            now=now,
            expires=now + ttl if ttl else None,
            claim=claim,
            lease_seconds=lease_seconds,
            landed=landed,
            epoch=epoch or 0,
        )
        if created and claim is not None and claim_for is not None:
            await _take(tx, new.session_id, held_by, claim_for)
    if not created and row["fingerprint"] != fp:
        raise _key_conflict(key, row["id"])
    return _run(row), created


def _in_time(new: NewRun, now: float) -> bool:
    """Whether a new run may start: one past its deadline already is recorded queued, and its claim ends it."""
    return new.deadline is None or new.deadline > now


def _key_conflict(key: str, run_id: str) -> Conflict:
    return Conflict(
        f"idempotency key {keys.given(key)!r} was already used for a different message or target (run {run_id})",
        code="idempotency_key_conflict",
    )


# `record` on PostgreSQL, one statement in autocommit: the function `backchannel_record_run` (store/pg_migrations.py
# 0021_record_run) takes the session's lock, then reads, decides and writes as `record`'s transaction does. Only a
# new run whose sender's rate is checked (`admit`, a Python callback that writes the rate in the transaction) is
# recorded in a transaction of several statements.
_RECORD_IN_ONE = (
    "SELECT r.outcome, r.waiting, (r.run).* FROM backchannel_record_run(" + ", ".join("?" for _ in range(30)) + ") AS r"
)


async def _record_in_one(
    db: Db,
    new: NewRun,
    fp: str,
    run_id: str,
    *,
    claim_for: str | None,
    now: float,
    lease_seconds: float,
    ttl_seconds: float | None,
    max_queued: int | None,
) -> tuple[Run, bool]:
    key = keys.dedup(fp, run_id) if new.idempotency_key is None else new.idempotency_key
    ttl = new.ttl_seconds or ttl_seconds
    files = new.files

    def announced(rows: list[Row]) -> list[str]:
        """What a run just recorded announces (as `_insert` does); a run filed already, or claimed here, nothing."""
        if rows[0]["outcome"] != "created" or rows[0]["state"] == "running":
            return []
        return [STEER_PREFIX + new.session_id if rows[0]["landed"] == "steered" else run_id]

    claim_for = claim_for if _in_time(new, now) else None
    rows = await db.write(
        _RECORD_IN_ONE,
        (
            *(run_id, key, fp, new.sender, new.profile, new.session_id, new.message, new.hops),
            json.dumps(list(new.chain)),
            new.held,
            new.steer,
            now,
            now + ttl if ttl else None,
            new.origin or run_id,  # a person's message starts its own exchange
            *(new.sender_profile, new.sender_session, new.wait_seconds, int(new.wake)),
            claim_for,
            now + lease_seconds,
            new.traceparent,
            new.tracestate,
            max_queued or None,
            now - new.retry_window if new.idempotency_key is None and new.retry_window > 0 else None,
            [f.name for f in files],
            [f.media_type for f in files],
            [f.url for f in files],
            [f.content for f in files],
            [f.size for f in files],
            new.deadline,
        ),
        announce=announced,
    )
    row = rows[0]
    if row["outcome"] == "over_cap":
        assert max_queued
        raise _queue_full(new, int(row["waiting"]), max_queued)
    if row["outcome"] == "filed" and row["fingerprint"] != fp:
        raise _key_conflict(key, row["id"])
    return _run(row), row["outcome"] == "created"


def _landed(new: NewRun, waiting: int, running: int, turn_sender: str | None) -> str | None:
    """Where a new message lands: started (its session idle: claimed at once when it may be), steered into the
    running turn (a steer joins only a turn its own caller started: another's message waits its turn), or queued;
    None for a held one. PostgreSQL's `backchannel_record_run` decides the same in SQL: change both together."""
    if new.held:
        return None
    if new.steer and running and turn_sender is not None and same_caller(new.sender, turn_sender):
        return "steered"
    return "queued" if waiting or running else "started"


async def _filed(
    db: Db, tx: Tx, new: NewRun, fp: str, run_id: str, now: float, *, look: bool
) -> tuple[Row | None, str, bool]:
    """The run this message is filed under already, if any (a client's retry within its window; with `look`, the
    run of its key, asked again with the same text and target), the key it is filed under, and whether that key is
    known (a replay, answered with its run whatever the limits say now)."""
    key = new.idempotency_key
    if key is None:
        if new.retry_window > 0:
            recent = await tx.one(
                "SELECT * FROM runs WHERE fingerprint = ?"
                f" AND {db.dialect.starts_with('idempotency_key', 'dedup:')}"
                f" AND (created_at >= ? OR state IN ({UNFINISHED_SQL}))"
                " AND state NOT IN ('failed', 'cancelled', 'expired', 'denied') ORDER BY seq DESC LIMIT 1",
                (fp, now - new.retry_window),
            )
            if recent is not None:
                return recent, recent["idempotency_key"], True
        return None, keys.dedup(fp, run_id), False
    if look and (known := await tx.one("SELECT * FROM runs WHERE idempotency_key = ?", (key,))):
        return (known if known["fingerprint"] == fp else None), key, True
    return None, key, False


async def _load(tx: Tx, session_id: str) -> tuple[int, int, str | None]:
    """One read for the queue cap, the claim and where the message lands: how many of the session's runs wait,
    how many run, and whose message that running turn answers."""
    counted = await tx.one(
        "SELECT COUNT(*) FILTER (WHERE state = 'queued'), COUNT(*) FILTER (WHERE state = 'running'),"
        " MAX(sender) FILTER (WHERE state = 'running') FROM runs"
        " WHERE session_id = ? AND state IN ('queued', 'running')",
        (session_id,),
    )
    if counted is None:
        return 0, 0, None
    return int(counted[0]), int(counted[1]), counted[2]


async def _over_cap(tx: Tx, new: NewRun, key: str, waiting: int, max_queued: int) -> None:
    """Refuse a new run past the session's cap (LimitReached); a replay (its key known) is answered with its run
    whatever the limits say now."""
    if await tx.one("SELECT 1 FROM runs WHERE idempotency_key = ?", (key,)) is not None:
        return
    raise _queue_full(new, waiting, max_queued)


def _queue_full(new: NewRun, waiting: int, max_queued: int) -> LimitReached:
    return LimitReached(
        f"session {new.session_id!r} already has {waiting} message{'' if waiting == 1 else 's'} waiting "
        f"(gateway.max_queued_per_session is {max_queued}); try again once it has answered some",
        code="queue_full",
        retry_after=QUEUE_FULL_RETRY_SECONDS,
    )


async def _insert(
    tx: Tx,
    new: NewRun,
    run_id: str,
    key: str,
    fp: str,
    *,
    now: float,
    expires: float | None,
    claim: tuple[str | None, float] | None,
    lease_seconds: float,
    landed: str | None,
    epoch: int = 0,
) -> tuple[Row, bool]:
    """The run written (held, queued, or running under `claim`: its owner and the time its turn starts, its lease
    `lease_seconds` from then) with its files, and True;
    or the run the key is filed under already (another writer's, just now), and False."""
    state = RunState.HELD if new.held else RunState.RUNNING if claim else RunState.QUEUED
    row = await tx.one(
        "INSERT INTO runs (id, idempotency_key, fingerprint, sender, profile, session_id, message, hops, chain,"
        " state, created_at, updated_at, expires_at, origin, sender_profile, sender_session, wait_seconds, wake,"
        " owner, lease_until, attempts, started_at, fencing, landed, traceparent, tracestate, epoch, deadline)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
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
            state.value,
            now,
            now,
            expires,
            new.origin or run_id,  # a person's message starts its own exchange
            new.sender_profile,
            new.sender_session,
            new.wait_seconds,
            int(new.wake),
            claim[0] if claim else None,
            claim[1] + lease_seconds if claim else None,
            1 if claim else 0,
            claim[1] if claim else None,
            1 if claim else 0,
            landed,
            new.traceparent,
            new.tracestate,
            epoch if claim else 0,
            new.deadline,
        ),
    )
    if row is None:
        row = await tx.one("SELECT * FROM runs WHERE idempotency_key = ?", (key,))
        assert row is not None  # the key's run, which the insert ran into
        return row, False
    if new.files:
        await tx.many(
            "INSERT INTO run_files (run_id, ordinal, name, media_type, url, content, size)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(run_id, n, f.name, f.media_type, f.url, f.content, f.size) for n, f in enumerate(new.files)],
        )
    # A message to steer names its session, so the gateway running that session's turn looks for it (`SteerHints`).
    # A run claimed at its record is this gateway's to run: no other needs to hear of it (its end is announced).
    if claim is None:
        await tx.announce(STEER_PREFIX + new.session_id if landed == "steered" else run_id)
    return row, True


async def files_of(db: Db, run_ids: list[str]) -> dict[str, list[Attachment]]:
    """The files each of the runs came with, in the order they were sent (runs without any left out)."""
    unique = sorted(set(run_ids))
    if not unique:
        return {}
    marks = ", ".join("?" for _ in unique)
    found: dict[str, list[Attachment]] = {}
    for r in await db.all(
        f"SELECT run_id, name, media_type, url, content FROM run_files WHERE run_id IN ({marks})"
        " ORDER BY run_id, ordinal",
        unique,
    ):
        found.setdefault(r["run_id"], []).append(Attachment(r["name"], r["media_type"], r["content"], r["url"]))
    return found


async def get(db: Db, run_id: str) -> Run:
    row = await db.one("SELECT * FROM runs WHERE id = ?", (run_id,))
    if row is None:
        raise NotFound(f"no run {run_id!r}", code="run_not_found")
    return _run(row)


async def ids_starting(db: Db, prefix: str, *, most: int) -> list[str]:
    """The ids of the runs that start with `prefix`, in order, `most` at the most (a range of the primary key)."""
    rows = await db.all(  # `~` sorts after every character of an id
        "SELECT id FROM runs WHERE id >= ? AND id < ? ORDER BY id LIMIT ?", (prefix, prefix + "~", most)
    )
    return [row[0] for row in rows]


async def by_key(db: Db, key: str) -> Run | None:
    """The run filed under an idempotency key, if any."""
    row = await db.one("SELECT * FROM runs WHERE idempotency_key = ?", (key,))
    return _run(row) if row is not None else None


async def queue_position(db: Db, run: Run) -> int | None:
    """1-based place among the queued runs of the run's session; None when it is not queued."""
    if run.state is not RunState.QUEUED:
        return None
    row = await db.one(
        f"SELECT COUNT(*) FROM runs WHERE session_id = ? AND state = 'queued' AND ({IN_LINE}) <= ({_PLACE})",
        (run.session_id, run.id),
    )
    return int(row[0]) if row else None


_PLACE = f"SELECT {IN_LINE} FROM runs WHERE id = ?"  # a run's place in its queue (row values: both backends)


async def runs_ahead(db: Db, run: Run) -> int:
    """How many runs of the run's session go before it: the one running and those queued earlier (0 when
    it is not queued)."""
    if run.state is not RunState.QUEUED:
        return 0
    row = await db.one(
        "SELECT COUNT(*) FROM runs WHERE session_id = ?"
        f" AND (state = 'running' OR (state = 'queued' AND ({IN_LINE}) < ({_PLACE})))",
        (run.session_id, run.id),
    )
    return int(row[0]) if row else 0


async def ended_among(db: Db, run_ids: list[str]) -> list[Run]:
    """Those of the runs that have ended (in whichever process or gateway)."""
    unique = sorted(set(run_ids))
    if not unique:
        return []
    rows = await db.all(
        f"SELECT * FROM runs WHERE id IN ({', '.join('?' for _ in unique)}) AND state NOT IN ({UNFINISHED_SQL})",
        unique,
    )
    return [_run(r) for r in rows]


async def has_queued(db: Db, session_id: str) -> bool:
    """Whether the session has a queued run (a read: no write transaction)."""
    found = await db.one("SELECT 1 FROM runs WHERE session_id = ? AND state = 'queued' LIMIT 1", (session_id,))
    return found is not None


async def claim_next(db: Db, session_id: str, *, owner: str, lease_seconds: float) -> tuple[Run | None, list[Run]]:
    """Take the oldest queued run of a session, unless one of its runs is running (in any process).

    Returns (the claimed run or None, the runs that expired in the queue on the way). Ask `has_queued`
    first: the common case after a turn needs no write transaction. On a shared store the claim waits for
    whatever holds the session's row (another gateway's claim, or a send being recorded or refused): a row
    held is not an empty queue, and a claim that passed it over left the session's runs queued with nobody
    to take them.

    A session another live gateway owns is not claimed here (None at once, without waiting on its row: its owner
    is told of its runs by the notice); one nobody owns, or whose owner is gone, is taken (its epoch moved on)."""
    expired: list[Run] = []
    seen: Row | None = None
    if db.dialect.row_locks:  # who owns it, read before its lock: a live owner's session is not waited on
        seen = await db.one("SELECT owner FROM sessions WHERE id = ?", (session_id,))
        if seen is not None and seen[0] not in (None, owner) and not await db.gone({seen[0]}):
            return None, expired
    async with db.tx() as tx:
        # One after another with the session's records and other claims (as `record`).
        held_by = await tx.one(f"SELECT owner, epoch FROM sessions WHERE id = ?{db.dialect.for_update}", (session_id,))
        if seen is not None and held_by is not None and held_by[0] not in (seen[0], owner):
            return None, expired  # taken by another gateway while this one looked
        if await tx.one("SELECT 1 FROM runs WHERE session_id = ? AND state = 'running' LIMIT 1", (session_id,)):
            return None, expired
        now = time.time()  # the session seen free just now: its last turn ended before this, however long the wait
        while True:
            row = await tx.one(
                "SELECT * FROM runs WHERE session_id = ? AND state = 'queued' AND steered_into IS NULL"
                f" ORDER BY {IN_LINE} LIMIT 1",
                (session_id,),
            )
            if row is None:
                return None, expired
            late = row["deadline"] is not None and row["deadline"] <= now
            if late or (row["expires_at"] is not None and row["expires_at"] < now):
                why, code = (
                    (_LATE, DEADLINE_PASSED) if late else ("expired after waiting {:.0f}s in the queue", "expired")
                )
                gone = await tx.one(
                    "UPDATE runs SET state = 'expired', error = ?, error_code = ?, updated_at = ?,"
                    " finished_at = ? WHERE seq = ? RETURNING *",
                    (why.format(now - row["created_at"]), code, now, now, row["seq"]),
                )
                assert gone is not None  # the row read under the same lock
                await tx.announce(gone["id"])
                expired.append(_run(gone))
                continue
            epoch = await _take(tx, session_id, held_by, owner)
            updated = await tx.one(  # a message to be steered that the turn ended before taking runs on its own
                "UPDATE runs SET state = 'running', attempts = attempts + 1, fencing = fencing + 1, owner = ?,"
                " lease_until = ?, started_at = ?, updated_at = ?, epoch = ?,"
                " landed = CASE WHEN landed = 'steered' THEN 'queued' ELSE landed END"
                " WHERE seq = ? AND state = 'queued' RETURNING *",
                (owner, now + lease_seconds, now, now, epoch, row["seq"]),
            )
            assert updated is not None  # the row read under the same lock
            await tx.announce(updated["id"])
            return _run(updated), expired


async def _may_take(db: Db, held_by: Row | None, owner: str) -> int | None:
    """The epoch a claim by `owner` in a session (its row `held_by`: owner, epoch) is made under, or None when
    another live gateway owns the session (SQLite has one gateway: it may always take)."""
    holder, epoch = (held_by[0], int(held_by[1])) if held_by is not None else (None, 0)
    if holder is None or holder == owner:
        return epoch if holder == owner else epoch + 1
    if not db.dialect.row_locks or await db.gone({holder}):
        return epoch + 1
    return None


async def _take(tx: Tx, session_id: str, held_by: Row | None, owner: str) -> int:
    """The session owned by `owner` from now on (its epoch one more when it was not already): the epoch its claim
    is made under."""
    if held_by is None:
        return 0
    if held_by[0] == owner:
        return int(held_by[1])
    took = await tx.one(
        "UPDATE sessions SET owner = ?, epoch = epoch + 1 WHERE id = ? RETURNING epoch", (owner, session_id)
    )
    assert took is not None  # the row read under the same lock
    return int(took[0])


async def owner_of(db: Db, session_id: str) -> tuple[str | None, int]:
    """The gateway that owns a session (None: nobody) and the session's epoch."""
    row = await db.one("SELECT owner, epoch FROM sessions WHERE id = ?", (session_id,))
    return (row[0], int(row[1])) if row is not None else (None, 0)


async def give_up(db: Db, owner: str) -> int:
    """A stopping gateway's sessions, owned by nobody: another gateway takes them at its next claim. How many."""
    async with db.tx() as tx:
        given = await tx.run("UPDATE sessions SET owner = NULL WHERE owner = ?", (owner,))
        if given:
            await tx.announce("sessions:" + owner)  # wakes the other gateways' look for queued runs
    return given


async def free_sessions(db: Db, owners: set[str]) -> int:
    """The sessions of gateways known gone, owned by nobody (their queued runs claimed by whoever looks next)."""
    freed = 0
    for gone in sorted(owners):
        freed += await give_up(db, gone)
    return freed


async def unclaim(db: Db, run: Run, *, owner: str) -> Run | None:
    """Put a run this owner claimed back in the queue before its turn began (the claim does not count as
    an attempt). None when it was not ours any more."""
    async with db.tx() as tx:
        row = await tx.one(
            "UPDATE runs SET state = 'queued', attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,"
            " owner = NULL, lease_until = NULL, started_at = NULL, updated_at = ?"
            f" WHERE id = ? AND state = 'running' AND owner = ? AND fencing = ? AND {CURRENT_EPOCH} RETURNING *",
            (time.time(), run.id, owner, run.fencing),
        )
        if row is not None:
            await _release_steered(tx, run.id)
            await tx.announce(run.id)
    return _run(row) if row is not None else None


async def expire_due(db: Db, profile: str) -> list[Run]:
    """Expire the profile's queued runs past their TTL (as `claim_next` would, for a queue nobody claims from)."""
    now = time.time()
    async with db.tx() as tx:
        rows = await tx.all(
            "UPDATE runs SET state = 'expired', error = 'expired after waiting ' || CAST(ROUND(? - created_at) AS"
            " INTEGER) || 's in the queue', error_code = 'expired', updated_at = ?, finished_at = ?"
            " WHERE profile = ? AND state = 'queued' AND steered_into IS NULL AND expires_at IS NOT NULL"
            " AND expires_at < ? RETURNING *",
            (now, now, now, profile, now),
        )
        for r in rows:
            await tx.announce(r["id"])
    return [_run(r) for r in rows]


async def expire_late(db: Db, now: float) -> list[Run]:
    """End the runs past their deadline that never started (`expired`, `deadline_passed`) wherever they wait:
    queued (behind a long turn, or where nobody claims), or held for the person and never released. One guarded
    UPDATE; the sweep calls it only once `next_deadline` is due."""
    async with db.tx() as tx:
        rows = await tx.all(
            "UPDATE runs SET state = 'expired', error = CASE state"
            " WHEN 'held' THEN 'its deadline passed after ' || CAST(ROUND(? - created_at) AS INTEGER)"
            " || 's held for the person, never released: never started'"
            " ELSE 'its deadline passed after waiting ' || CAST(ROUND(? - created_at) AS INTEGER)"
            " || 's in the queue: never started' END, error_code = ?, updated_at = ?, finished_at = ?"
            " WHERE state IN ('queued', 'held') AND deadline IS NOT NULL AND deadline <= ? AND steered_into IS NULL"
            " RETURNING *",
            (now, now, DEADLINE_PASSED, now, now, now),
        )
        for r in rows:
            await tx.announce(r["id"])
    return [_run(r) for r in rows]


async def next_deadline(db: Db) -> float | None:
    """The earliest deadline of a run that has not started, queued or held for the person (None: none has one),
    for the sweep's next round: one read, each half over its own index (queued deadlines, runs by state)."""
    row = await db.one(
        "SELECT MIN(due) FROM (SELECT MIN(deadline) AS due FROM runs WHERE state = 'queued' AND deadline IS NOT NULL"
        " AND steered_into IS NULL UNION ALL SELECT MIN(deadline) FROM runs WHERE state = 'held'"
        " AND deadline IS NOT NULL) AS waiting"
    )
    return None if row is None or row[0] is None else float(row[0])


async def renew_leases(db: Db, run_ids: list[str], *, owner: str, lease_seconds: float) -> None:
    if not run_ids:
        return
    until = time.time() + lease_seconds
    async with db.tx() as tx:
        await tx.many(
            f"UPDATE runs SET lease_until = ? WHERE id = ? AND owner = ? AND state = 'running' AND {CURRENT_EPOCH}",
            [(until, rid, owner) for rid in run_ids],
        )


# Whether a session has a queued run: read with a turn's end, so its worker needs no read of its own to know.
_QUEUED_BEHIND = "EXISTS (SELECT 1 FROM runs q WHERE q.session_id = {session} AND q.state = 'queued')"

# A run's end in one statement (PostgreSQL): the fenced update; its messages, in order; its session's counters; and
# whether its session has another run queued. The writes in WITH run whether or not the query reads them, all or none.
_FINISH_IN_ONE = (
    "WITH done AS ("
    "UPDATE runs SET state = ?, reply = ?, error = ?, error_code = ?, owner = NULL, lease_until = NULL,"
    " updated_at = ?, finished_at = ?, tokens_in = tokens_in + ?, tokens_out = tokens_out + ?,"
    " cost_usd = cost_usd + ?, trace_span = COALESCE(?, trace_span), consumed = COALESCE(consumed, ?)"
    f" WHERE id = ? AND state = 'running' AND owner = ? AND fencing = ? AND {CURRENT_EPOCH} RETURNING *),"
    " said AS (INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id, name, run_id, created_at)"
    " SELECT done.session_id, m.role, m.content, m.tool_calls, m.tool_call_id, m.name, done.id, ?"
    " FROM done, unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[]) WITH ORDINALITY"
    " AS m(role, content, tool_calls, tool_call_id, name, ord) ORDER BY m.ord RETURNING 1),"
    " counted AS (UPDATE sessions SET updated_at = ?, message_count = message_count + ? FROM done"
    " WHERE sessions.id = done.session_id AND ? > 0 RETURNING 1)"
    f" SELECT *, {_QUEUED_BEHIND.format(session='done.session_id')} AS queued_behind FROM done"
)


class Ended(NamedTuple):
    """A turn's end as saved: the run (None when it was not ours to finish), and whether its session had another run
    queued when it ended (its worker claims that one next, with no read to find out; None: not read)."""

    run: Run | None
    queued_behind: bool | None


async def finish(
    db: Db,
    run: Run,
    *,
    owner: str,
    state: RunState,
    reply: str | None = None,
    error: str | None = None,
    error_code: str | None = None,
    messages: list[Message] | None = None,
    spent: Spent = NOTHING_SPENT,
    steered: bool = False,
    trace_span: str | None = None,
    consumed: Mapping[str, Consumed] | None = None,
) -> Ended:
    """End a running run that this owner holds under the claim `run` was given (its fencing token); its messages,
    its state, what its turn spent since last recorded commit and the consumed receipts of its messages (its own
    and those steered into it, by run) together; and read, in the same statement (PostgreSQL) or transaction
    (SQLite), whether its session has another run queued.

    `Ended.run` is None when it was not ours to finish (the lease lost, the run claimed again)."""
    now = time.time()
    consumed = consumed or {}
    own = consumed[run.id].to_json() if run.id in consumed else None
    if db.dialect.writes_in_with and not steered:  # one statement: one round trip on the reply's path
        said = messages or []
        rows = await db.write(
            _FINISH_IN_ONE,
            (
                *(state.value, reply, error, error_code, now, now, *spent, trace_span, own),
                *(run.id, owner, run.fencing),
                now,
                [m.role for m in said],
                [m.content for m in said],
                [tool_calls_json(m) for m in said],
                [m.tool_call_id for m in said],
                [m.name for m in said],
                now,
                len(said),
                len(said),
            ),
            announce=(run.id,),
        )
        return Ended(_run(rows[0]), bool(rows[0]["queued_behind"])) if rows else Ended(None, False)
    async with db.tx() as tx:
        row = await tx.one(
            "UPDATE runs SET state = ?, reply = ?, error = ?, error_code = ?, owner = NULL, lease_until = NULL,"
            " updated_at = ?, finished_at = ?, tokens_in = tokens_in + ?, tokens_out = tokens_out + ?,"
            " cost_usd = cost_usd + ?, trace_span = COALESCE(?, trace_span), consumed = COALESCE(consumed, ?)"
            f" WHERE id = ? AND state = 'running' AND owner = ? AND fencing = ? AND {CURRENT_EPOCH} RETURNING *",
            (state.value, reply, error, error_code, now, now, *spent, trace_span, own, run.id, owner, run.fencing),
        )
        if row is None:
            return Ended(None, False)
        if messages:
            await append_messages(tx, row["session_id"], messages, run_id=run.id)
        await tx.announce(run.id)
        if steered:  # the messages the turn took in end with it, as it ended
            for gone in await tx.all(
                "UPDATE runs SET state = ?, reply = ?, error = ?, error_code = ?, updated_at = ?, finished_at = ?"
                " WHERE steered_into = ? AND state = 'queued' RETURNING id",
                (state.value, reply, error, error_code, now, now, run.id),
            ):
                await tx.announce(gone["id"])
            await consumed_steered(tx, run.id, consumed)
        behind = await tx.one(f"SELECT {_QUEUED_BEHIND.format(session='?')} AS queued_behind", (row["session_id"],))
    return Ended(_run(row), bool(behind and behind["queued_behind"]))


async def consumed_steered(tx: Tx, turn: str, consumed: Mapping[str, Consumed]) -> None:
    """The consumed receipts of the messages steered into the turn of run `turn`, written with its end (a message
    it took in after its last model call has none: it was never read)."""
    marks = [(mark.to_json(), run_id, turn) for run_id, mark in consumed.items() if run_id != turn]
    if marks:
        await tx.many("UPDATE runs SET consumed = COALESCE(consumed, ?) WHERE id = ? AND steered_into = ?", marks)


def same_caller(sender: str, other: str) -> bool:
    """Whether two runs' senders are one caller, whose message may be steered into the other's turn: the person
    (from whichever surface), or the same agent session, or the same peer's agent."""
    return sender == other or (sender.startswith(HUMAN) and other.startswith(HUMAN))


async def take_steered(db: Db, run: Run) -> list[Run]:
    """The messages to be steered into the running turn of `run` (its claim still current), oldest first; each
    is the turn's from now on, and ends with it. Only its own caller's (`same_caller`): a message to steer that
    outlived the turn it was meant for never joins another sender's turn."""
    now = time.time()
    humans = db.dialect.starts_with("sender", HUMAN)
    async with db.tx() as tx:
        rows = await tx.all(
            "UPDATE runs SET steered_into = ?, started_at = ?, updated_at = ? WHERE session_id = ? AND state = 'queued'"
            " AND landed = 'steered' AND steered_into IS NULL"
            " AND EXISTS (SELECT 1 FROM runs AS turn WHERE turn.id = ? AND turn.state = 'running' AND turn.fencing = ?"
            " AND NOT EXISTS (SELECT 1 FROM sessions es WHERE es.id = turn.session_id AND es.epoch <> turn.epoch))"
            f" AND (sender = ? OR (? AND {humans}))"
            " RETURNING *",
            (run.id, now, now, run.session_id, run.id, run.fencing, run.sender, run.sender.startswith(HUMAN)),
        )
        for r in rows:
            await tx.announce(r["id"])
    return sorted((_run(r) for r in rows), key=lambda r: r.seq)


async def _release_steered(tx: Tx, run_id: str) -> None:
    """The messages a turn took in that will not end with it (it runs again, or not at all): waiting to be
    steered again, into its next attempt (or run on their own)."""
    await tx.run("UPDATE runs SET steered_into = NULL WHERE steered_into = ? AND state = 'queued'", (run_id,))


async def spend(db: Db, run: Run, spent: Spent) -> None:
    """Add what a running turn's model calls used since last recorded, under the claim `run` was given (the
    budgets weigh a send from the turn against it)."""
    async with db.tx() as tx:
        await tx.run(
            "UPDATE runs SET tokens_in = tokens_in + ?, tokens_out = tokens_out + ?, cost_usd = cost_usd + ?"
            f" WHERE id = ? AND state = 'running' AND fencing = ? AND {CURRENT_EPOCH}",
            (*spent, run.id, run.fencing),
        )


async def cancel_waiting(db: Db, run_id: str) -> Run | None:
    """Cancel a run whose turn is not running: queued, held for the person, or waiting for its person's answer
    (its open question is cancelled with it); None when it is none of these (any more)."""
    now = time.time()
    async with db.tx() as tx:
        row = await tx.one(
            "UPDATE runs SET state = 'cancelled', error = CASE state WHEN 'held' THEN"
            " 'cancelled while held for the person, before it started' WHEN 'input_required' THEN"
            " 'cancelled while it waited for its person to answer its question' ELSE 'cancelled before it started'"
            " END, error_code = 'cancelled', updated_at = ?, finished_at = ? WHERE id = ?"
            " AND state IN ('queued', 'held', 'input_required') RETURNING *",
            (now, now, run_id),
        )
        if row is not None:
            await tx.run(
                "UPDATE questions SET state = 'cancelled', answered_by = 'stop', answered_at = ?"
                " WHERE run_id = ? AND state = 'open'",
                (now, run_id),
            )
            await tx.announce(run_id)
    return _run(row) if row is not None else None


async def reclaim(
    db: Db, *, is_dead: Callable[[str], bool], max_attempts: int, keep: set[str] | frozenset[str] = frozenset()
) -> list[Run]:
    """Requeue runs left `running` by a dead owner or an expired lease (except the runs in `keep`, which
    their live owner still holds); past max_attempts they fail. Returns the runs as they now are."""
    now = time.time()
    changed: list[Run] = []
    async with db.tx() as tx:
        rows = await tx.all(f"SELECT * FROM runs WHERE state = 'running'{db.dialect.skip_locked}")
        stale = [
            r for r in rows if r["id"] not in keep and ((r["lease_until"] or 0) < now or is_dead(r["owner"] or ""))
        ]
        for r in stale:
            if r["attempts"] >= max_attempts:
                row = await tx.one(
                    "UPDATE runs SET state = 'failed', error = ?, error_code = 'interrupted', owner = NULL,"
                    " updated_at = ?, finished_at = ? WHERE seq = ? AND state = 'running' RETURNING *",
                    (f"interrupted {r['attempts']} times by a gateway stop; not retried", now, now, r["seq"]),
                )
            else:
                row = await tx.one(
                    "UPDATE runs SET state = 'queued', owner = NULL, lease_until = NULL, updated_at = ?"
                    " WHERE seq = ? AND state = 'running' RETURNING *",
                    (now, r["seq"]),
                )
            if row is not None:
                await _release_steered(tx, row["id"])
                # Its session owned by nobody now (its owner dead, or silent past its lease): taken at the next claim.
                await tx.run(
                    "UPDATE sessions SET owner = NULL WHERE id = ? AND owner = ?", (r["session_id"], r["owner"])
                )
                await tx.announce(row["id"])
                changed.append(_run(row))
    return changed


async def owners_gone(db: Db, *, mine: str) -> set[str]:
    """The owners of running runs and of sessions, other than `mine`, whose process the store knows ended
    (`Db.gone`)."""
    rows = await db.all(
        "SELECT DISTINCT owner FROM runs WHERE state = 'running' AND owner IS NOT NULL AND owner <> ?"
        " UNION SELECT DISTINCT owner FROM sessions WHERE owner IS NOT NULL AND owner <> ?",
        (mine, mine),
    )
    return await db.gone({row[0] for row in rows}) if rows else set()


async def ask_wake(db: Db, run_id: str) -> bool:
    """The sender stopped waiting: deliver the reply into its session when it comes. False if already over."""
    async with db.tx() as tx:
        changed = await tx.run(
            f"UPDATE runs SET wake = 1 WHERE id = ? AND state IN ({UNFINISHED_SQL})",
            (run_id,),
        )
    return changed == 1


async def pending_wakes(db: Db) -> list[Run]:
    """Finished runs whose sender asked to be woken and whose wake-up run does not exist yet."""
    rows = await db.all(
        f"SELECT r.* FROM runs r WHERE r.wake = 1 AND r.state NOT IN ({UNFINISHED_SQL})"
        " AND NOT EXISTS (SELECT 1 FROM runs w WHERE w.idempotency_key = ? || r.id)",
        (keys.WAKE,),
    )
    return [_run(r) for r in rows]


async def pair_count(db: Db, *, sender_profile: str, profile: str, origin: str, since: float) -> int:
    """Agent-sent runs from one profile to another within one exchange (one person's message) since a time."""
    row = await db.one(
        "SELECT COUNT(*) FROM runs WHERE sender_profile = ? AND profile = ? AND origin = ? AND created_at >= ?",
        (sender_profile, profile, origin, since),
    )
    return int(row[0]) if row else 0


async def exchange_tokens(db: Db, exchange: str) -> int:
    """Tokens every run of one exchange used: the person's message's run (the exchange is named by its id, its
    own origin) and each run that followed it."""
    row = await db.one(
        "SELECT (SELECT COALESCE(SUM(tokens_in + tokens_out), 0) FROM runs WHERE origin = ? AND hops > 0)"
        " + (SELECT COALESCE(SUM(tokens_in + tokens_out), 0) FROM runs WHERE id = ?)",  # each by its index
        (exchange, exchange),
    )
    return int(row[0]) if row else 0


async def profile_spent(db: Db, profile: str, since: float) -> tuple[int, float]:
    """Tokens and US dollars the turns of one profile used, of the runs made since a time."""
    row = await db.one(
        "SELECT COALESCE(SUM(tokens_in + tokens_out), 0), COALESCE(SUM(cost_usd), 0) FROM runs"
        " WHERE profile = ? AND created_at >= ?",
        (profile, since),
    )
    return (int(row[0]), float(row[1])) if row else (0, 0.0)


async def count_by_state(db: Db, states: tuple[RunState, ...]) -> dict[RunState, int]:
    """How many runs of the home are in each of `states` (0 for none)."""
    placeholders = ", ".join("?" for _ in states)
    rows = await db.all(
        f"SELECT state, COUNT(*) FROM runs WHERE state IN ({placeholders}) GROUP BY state",
        tuple(s.value for s in states),
    )
    counts = {state: 0 for state in states}
    counts.update({RunState(r[0]): int(r[1]) for r in rows})
    return counts


async def profile_of_session(db: Db, session_id: str) -> str:
    row = await db.one("SELECT profile FROM runs WHERE session_id = ? ORDER BY seq DESC LIMIT 1", (session_id,))
    if row is None:
        raise NotFound(f"no runs for session {session_id!r}", code="session_not_found")
    return str(row[0])


async def sessions_with_queued(db: Db) -> list[str]:
    return [r[0] for r in await db.all("SELECT DISTINCT session_id FROM runs WHERE state = 'queued'")]


async def sessions_unworked(db: Db) -> list[tuple[str, str]]:
    """The sessions (and their profiles) with a queued run and none running anywhere: nothing works on them
    now. Read on the state index, so it costs what is queued, not the store's size."""
    rows = await db.all(
        "SELECT DISTINCT q.session_id, q.profile FROM runs q WHERE q.state = 'queued' AND q.steered_into IS NULL"
        " AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.session_id = q.session_id AND r.state = 'running')"
    )
    return [(r[0], r[1]) for r in rows]


async def list_runs(
    db: Db,
    *,
    states: tuple[RunState, ...] = (),
    profile: str | None = None,
    session_id: str | None = None,
    limit: int = 50,
) -> list[Run]:
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
    rows = await db.all(f"SELECT * FROM runs {where} ORDER BY seq DESC LIMIT ?", (*params, limit))
    return [_run(r) for r in rows]


# --- holds -------------------------------------------------------------------------------------------


async def held(db: Db, *, profile: str | None = None) -> list[Run]:
    """Messages waiting for the person, oldest first (of `profile` only, when given)."""
    where, params = ("AND profile = ?", (profile,)) if profile is not None else ("", ())
    return [_run(r) for r in await db.all(f"SELECT * FROM runs WHERE state = 'held' {where} ORDER BY seq", params)]


async def approve(db: Db, run_id: str, *, ttl_seconds: float | None) -> Run | None:
    """A held run queued (its queue TTL starts now); None when it is not held (any more), or its deadline passed
    (it is over: `expire_late` ends it)."""
    now = time.time()
    async with db.tx() as tx:
        row = await tx.one(
            "UPDATE runs SET state = 'queued', updated_at = ?, released_at = ?, expires_at = ?"
            " WHERE id = ? AND state = 'held' AND (deadline IS NULL OR deadline > ?) RETURNING *",
            (now, now, now + ttl_seconds if ttl_seconds else None, run_id, now),
        )
        if row is not None:
            await tx.announce(run_id)
    return _run(row) if row is not None else None


async def deny(db: Db, run_id: str, *, why: str) -> Run | None:
    """A held run refused by the person (`denied`); None when it is not held (any more)."""
    now = time.time()
    async with db.tx() as tx:
        row = await tx.one(
            "UPDATE runs SET state = 'denied', error = ?, error_code = 'denied', updated_at = ?, finished_at = ?"
            " WHERE id = ? AND state = 'held' RETURNING *",
            (why, now, now, run_id),
        )
        if row is not None:
            await tx.announce(run_id)
    return _run(row) if row is not None else None


async def expire_held(db: Db) -> list[Run]:
    """Held runs past their hold expiry, expired (a read first: no write transaction when there are none, so
    an idle gateway stays idle and its WAL can be truncated)."""
    now = time.time()
    if not await has_held_expired(db, now):
        return []
    async with db.tx() as tx:
        rows = await tx.all(
            "UPDATE runs SET state = 'expired', error = 'held for the person ' || CAST(ROUND(? - created_at) AS"
            " INTEGER) || 's and not approved (hold_expiry_seconds)', error_code = 'hold_expired', updated_at = ?,"
            " finished_at = ? WHERE state = 'held' AND expires_at IS NOT NULL AND expires_at < ? RETURNING *",
            (now, now, now, now),
        )
        for r in rows:
            await tx.announce(r["id"])
    return [_run(r) for r in rows]


async def has_held_expired(db: Db, now: float) -> bool:
    """Whether a held run is past its hold expiry (a read)."""
    found = await db.one(
        "SELECT 1 FROM runs WHERE state = 'held' AND expires_at IS NOT NULL AND expires_at < ? LIMIT 1", (now,)
    )
    return found is not None


# --- A2A tasks -------------------------------------------------------------------------------------


async def a2a_tasks(db: Db, query: TaskQuery, *, limit: int) -> tuple[list[Run], int]:
    """A page of the runs `query.sender` sent to `query.profile` over A2A, most recently updated first, and
    how many match in all (every page): both read through the runs_a2a_tasks index."""
    clauses = ["profile = ?", db.dialect.starts_with("idempotency_key", "a2a:")]
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
    counted = await db.one(f"SELECT COUNT(*) FROM runs WHERE {where}", params)
    total = int(counted[0]) if counted is not None else 0
    page_where, page_params = where, list(params)
    if query.after is not None:
        page_where += " AND (updated_at, seq) < (?, ?)"
        page_params.extend(query.after)
    rows = await db.all(
        f"SELECT * FROM runs WHERE {page_where} ORDER BY updated_at DESC, seq DESC LIMIT ?",
        (*page_params, limit),
    )
    return [_run(r) for r in rows], total
