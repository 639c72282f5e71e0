"""The questions turns ask their person (`ask_person`, issue 42): a run parked `input_required` with its question,
and the question answered once, which puts the same run back in its session's queue.

A question is parked in the same transaction as its turn's end (`park`), and closed in the same transaction as
its run's return to the queue (`close`): a conditional UPDATE … WHERE state = 'open', so the first answer wins,
whatever the surface, and any other gets `question_closed` and changes nothing. The resumed run goes after every
run recorded before the answer (`runs.resumed_after`): the session's messages that came while it waited run first.

An in-turn question (`kind` in_turn: a Hermes run waiting for its person's approval) leaves its run running: it is
recorded once per key while the turn waits (`ask_in_turn`, again by a later attempt of the same turn), and closed
once (`close_in_turn`), the waiting turn reading it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import Conflict, NotFound
from ..messages import Message
from ..outcome import Consumed
from ..records import Question, Run
from .driver import Db, Reads, Row, columns
from .runs import CURRENT_EPOCH, NOTHING_SPENT, Spent, consumed_steered, from_row
from .sessions import append_messages

STATES = ("open", "answered", "defaulted", "cancelled")
NEXT_TURN, IN_TURN = "next_turn", "in_turn"  # what closing a question does (`Question.kind`)


@dataclass(frozen=True)
class NewQuestion:
    """What a turn asks: its text, the choices it offers (None: free text), the answer taken at expiry, and how
    long it stays open (None: until answered)."""

    id: str
    question: str
    choices: tuple[str, ...] | None = None
    default: str | None = None
    expires_in: float | None = None


def _question(row: Row) -> Question:
    r = columns(row)
    return Question(
        id=r["id"],
        run_id=r["run_id"],
        profile=r["profile"],
        session_id=r["session_id"],
        asker=r["asker"],
        origin=r["origin"],
        question=r["question"],
        choices=tuple(json.loads(r["choices"])) if r["choices"] is not None else None,
        default=r["default_answer"],
        expires_at=r["expires_at"],
        state=r["state"],
        answer=r["answer"],
        answered_by=r["answered_by"],
        answered_at=r["answered_at"],
        created_at=r["created_at"],
        outbound_id=r.get("outbound_id"),
        kind=r.get("kind") or NEXT_TURN,
    )


async def park(
    db: Db,
    run: Run,
    new: NewQuestion,
    *,
    owner: str,
    messages: list[Message] | None = None,
    spent: Spent = NOTHING_SPENT,
    trace_span: str | None = None,
    consumed: Mapping[str, Consumed] | None = None,
) -> tuple[Run, Question] | None:
    """End the turn of a running run this owner holds (under its claim's fencing) by asking its person: the run
    `input_required`, its messages, what it spent and the question, in one commit. The messages steered into the
    turn end with it (completed: the turn took them in). None when the run was not ours any more."""
    now = time.time()
    consumed = consumed or {}
    own = consumed.get(run.id)
    async with db.tx() as tx:
        row = await tx.one(
            "UPDATE runs SET state = 'input_required', owner = NULL, lease_until = NULL, expires_at = NULL,"
            " updated_at = ?, tokens_in = tokens_in + ?, tokens_out = tokens_out + ?, cost_usd = cost_usd + ?,"
            " trace_span = COALESCE(?, trace_span), consumed = COALESCE(consumed, ?)"
            f" WHERE id = ? AND state = 'running' AND owner = ? AND fencing = ? AND {CURRENT_EPOCH} RETURNING *",
            (now, *spent, trace_span, own.to_json() if own else None, run.id, owner, run.fencing),
        )
        if row is None:
            return None
        if messages:
            await append_messages(tx, row["session_id"], messages, run_id=run.id)
        asked = await tx.one(
            "INSERT INTO questions (id, run_id, profile, session_id, asker, origin, question, choices,"
            " default_answer, expires_at, state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?)"
            " RETURNING *",
            (
                new.id,
                run.id,
                row["profile"],
                row["session_id"],
                row["sender"],
                row["origin"],
                new.question,
                json.dumps(list(new.choices)) if new.choices is not None else None,
                new.default,
                now + new.expires_in if new.expires_in else None,
                now,
            ),
        )
        assert asked is not None
        for gone in await tx.all(
            "UPDATE runs SET state = 'completed', reply = ?, updated_at = ?, finished_at = ?"
            " WHERE steered_into = ? AND state = 'queued' RETURNING id",
            (f"(taken into a turn that asked its person: {new.question})", now, now, run.id),
        ):
            await tx.announce(gone["id"])
        await consumed_steered(tx, run.id, consumed)
        await tx.announce(run.id)
    return from_row(row), _question(asked)


async def close(db: Db, question_id: str, *, state: str, answer: str | None, by: str) -> tuple[Question, Run]:
    """Answer an open question once (`state` answered, defaulted or cancelled) and put its run back in its
    session's queue, after every run recorded until now. NotFound for no such question; Conflict
    (`question_closed`) when it is not open any more: the first answer stands and nothing changes."""
    now = time.time()
    async with db.tx() as tx:
        row = await tx.one(
            "UPDATE questions SET state = ?, answer = ?, answered_by = ?, answered_at = ?"
            f" WHERE id = ? AND state = 'open' AND kind = '{NEXT_TURN}' RETURNING *",
            (state, answer, by, now, question_id),
        )
        if row is None:
            closed = await get(tx, question_id)  # NotFound when there is none
            raise Conflict(
                f"question {question_id!r} is {closed.state} already"
                f"{f' (by {closed.answered_by})' if closed.answered_by else ''}: it is answered once",
                code="question_closed",
            )
        run = await tx.one(
            "UPDATE runs SET state = 'queued', attempts = 0, resumed_after = (SELECT MAX(seq) FROM runs),"
            " updated_at = ? WHERE id = ? AND state = 'input_required' RETURNING *",
            (now, row["run_id"]),
        )
        if run is None:  # its run ended meanwhile (stopped): the question goes with it
            raise Conflict(
                f"the run of question {question_id!r} is not waiting for it any more", code="question_closed"
            )
        await tx.announce(row["run_id"])
    return _question(row), from_row(run)


async def ask_in_turn(db: Db, run: Run, new: NewQuestion) -> Question:
    """Record the question a running turn waits on (kind in_turn), once per id: the same question asked again by a
    later attempt of the turn (after a restart) is the one kept, open or answered meanwhile."""
    now = time.time()
    async with db.tx() as tx:
        await tx.run(
            "INSERT INTO questions (id, run_id, profile, session_id, asker, origin, question, choices,"
            " default_answer, expires_at, state, created_at, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?, ?)"
            " ON CONFLICT (id) DO NOTHING",
            (
                new.id,
                run.id,
                run.profile,
                run.session_id,
                run.sender,
                run.origin,
                new.question,
                json.dumps(list(new.choices)) if new.choices is not None else None,
                new.default,
                now + new.expires_in if new.expires_in else None,
                now,
                IN_TURN,
            ),
        )
    return await get(db, new.id)


async def close_in_turn(db: Db, question_id: str, *, state: str, answer: str | None, by: str) -> Question:
    """Close an open in-turn question once (Conflict `question_closed` when it is closed already): its run is left
    as it is, the turn waiting on it takes the answer."""
    async with db.tx() as tx:
        row = await tx.one(
            "UPDATE questions SET state = ?, answer = ?, answered_by = ?, answered_at = ?"
            f" WHERE id = ? AND state = 'open' AND kind = '{IN_TURN}' RETURNING *",
            (state, answer, by, time.time(), question_id),
        )
        if row is None:
            closed = await get(tx, question_id)
            raise Conflict(
                f"question {question_id!r} is {closed.state} already"
                f"{f' (by {closed.answered_by})' if closed.answered_by else ''}: it is answered once",
                code="question_closed",
            )
    return _question(row)


async def get(db: Reads, question_id: str) -> Question:
    row = await db.one("SELECT * FROM questions WHERE id = ?", (question_id,))
    if row is None:
        raise NotFound(f"no question {question_id!r}", code="question_not_found")
    return _question(row)


_NOT_AN_AGENTS = "(outbound_id IS NULL OR asker LIKE 'human:%')"  # relayed to a person, or asked in one of our runs


async def listed(
    db: Db, *, state: str | None = "open", limit: int = 100, for_peer: bool | None = False
) -> list[Question]:
    """Questions in `state` (any when None): open ones oldest first (the longest waiting at the top), others newest
    first. `for_peer`: False, those our person answers; True, those asked in runs peers sent (theirs); None, all
    (with those a peer's agent asked one of our agents, which that agent answers)."""
    where, params = (["state = ?"], [state]) if state is not None else ([], [])
    if for_peer is not None:  # our person's: not a peer's (an in-turn question is our person's, whoever sent its run:
        # `Question.for_peer`), nor one a peer asked our agent (the agent answers it)
        peers = f"(asker LIKE 'peer:%' AND kind = '{NEXT_TURN}')"
        where.append(peers if for_peer else f"NOT {peers} AND {_NOT_AN_AGENTS}")
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    order = "created_at, id" if state == "open" else "created_at DESC, id"
    rows = await db.all(f"SELECT * FROM questions {clause} ORDER BY {order} LIMIT ?", (*params, limit))
    return [_question(r) for r in rows]


@dataclass(frozen=True)
class Relayed:
    """A question a peer's agent asked in a run our sender sent there (`outbound_id`: that message's record)."""

    id: str
    outbound_id: int
    peer_address: str  # `peer:NAME[/AGENT]`
    remote_run_id: str
    remote_session_id: str | None
    asker: str  # our sender, who answers it: our person (`human:…`) or the agent's session that sent the message
    origin: str | None
    question: str
    choices: tuple[str, ...] | None = None
    default: str | None = None


async def relay(db: Db, new: Relayed) -> tuple[Question, bool]:
    """Record a peer's question for our sender, once per id (the same question seen again is the one kept); and
    whether it was recorded now (False: seen before)."""
    now = time.time()
    async with db.tx() as tx:
        created = await tx.run(
            "INSERT INTO questions (id, run_id, profile, session_id, asker, origin, question, choices,"
            " default_answer, expires_at, state, created_at, outbound_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, 'open', ?, ?) ON CONFLICT (id) DO NOTHING",
            (
                new.id,
                new.remote_run_id,
                new.peer_address,
                new.remote_session_id or "",
                new.asker,
                new.origin,
                new.question,
                json.dumps(list(new.choices)) if new.choices is not None else None,
                new.default,
                now,
                new.outbound_id,
            ),
        )
    return await get(db, new.id), created > 0


async def close_relayed(db: Db, question_id: str, *, state: str, answer: str | None, by: str) -> Question:
    """Close a relayed question once (Conflict `question_closed` when it is closed already); its answer then goes
    to the peer (`reopen` when it could not)."""
    async with db.tx() as tx:
        row = await tx.one(
            "UPDATE questions SET state = ?, answer = ?, answered_by = ?, answered_at = ?"
            " WHERE id = ? AND state = 'open' RETURNING *",
            (state, answer, by, time.time(), question_id),
        )
        if row is None:
            closed = await get(tx, question_id)
            raise Conflict(
                f"question {question_id!r} is {closed.state} already: it is answered once", code="question_closed"
            )
    return _question(row)


async def relayed_closed(db: Db, outbound_id: int) -> list[Question]:
    """The questions relayed from an outbound message's run that are closed, the last closed first (a question
    asked again after its answer is another)."""
    rows = await db.all(
        "SELECT * FROM questions WHERE outbound_id = ? AND state <> 'open' ORDER BY answered_at DESC", (outbound_id,)
    )
    return [_question(r) for r in rows]


async def relayed_last(db: Db, outbound_id: int) -> Question | None:
    """The question last relayed from an outbound message's run (open or closed), if any."""
    row = await db.one(
        "SELECT * FROM questions WHERE outbound_id = ? ORDER BY created_at DESC, id LIMIT 1", (outbound_id,)
    )
    return _question(row) if row is not None else None


async def close_moved_on(db: Db, outbound_id: int, *, by: str) -> list[str]:
    """The open questions relayed from an outbound message's run that went on without our answer (the peer's
    default at its expiry, a stop there): closed `cancelled`, by `by`. A read first: no write when there are none."""
    rows = await db.all("SELECT id FROM questions WHERE outbound_id = ? AND state = 'open'", (outbound_id,))
    if not rows:
        return []
    async with db.tx() as tx:
        gone = await tx.all(
            "UPDATE questions SET state = 'cancelled', answered_by = ?, answered_at = ?"
            " WHERE outbound_id = ? AND state = 'open' RETURNING id",
            (by, time.time(), outbound_id),
        )
    return [r["id"] for r in gone]


async def reopen(db: Db, question_id: str) -> None:
    """A relayed question whose answer the peer did not take: open again, to be answered again."""
    async with db.tx() as tx:
        await tx.run(
            "UPDATE questions SET state = 'open', answer = NULL, answered_by = NULL, answered_at = NULL WHERE id = ?",
            (question_id,),
        )


async def last_of(db: Db, run_id: str) -> Question | None:
    """The question the run's turn asked last, ending the turn (what a resumed turn is given), if any."""
    row = await db.one(
        f"SELECT * FROM questions WHERE run_id = ? AND kind = '{NEXT_TURN}' ORDER BY created_at DESC LIMIT 1",
        (run_id,),
    )
    return _question(row) if row is not None else None


async def due(db: Db, now: float) -> list[Question]:
    """Open questions past their expiry (a read: the sweep writes only when there are some)."""
    rows = await db.all(
        "SELECT * FROM questions WHERE state = 'open' AND expires_at IS NOT NULL AND expires_at < ?"
        " ORDER BY expires_at",
        (now,),
    )
    return [_question(r) for r in rows]
