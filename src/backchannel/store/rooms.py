"""Rooms: a person and several agents in one durable, ordered transcript (`core.rooms` drives them).

A room has members (addresses, in their order); each local member answers in a room session of its own
(`room_members.session_id`) and has seen the transcript up to a line (`seen`). Each of the person's messages is a
line and opens a round (`room_rounds`): the members still to answer (`waiting`, hand-offs first), how many have
answered, and the line of the member being asked now (`pending`). A round is driven by one gateway at a time, the
room's lease holder (`rooms.owner`, `lease_until`); what it writes is enough to go on after a crash with the member
whose turn it was.
"""

from __future__ import annotations

import json
import time
import uuid

from ..errors import Conflict, NotFound
from ..transcript import ASKED, SAID, Line, Room, Round, Waiting
from .driver import Db, Row, Tx


def _room(row: Row) -> Room:
    return Room(row["name"], tuple(json.loads(row["members"])), row["created_at"])


def _line(row: Row) -> Line:
    return Line(
        seq=row["seq"],
        room=row["room"],
        round=row["round"],
        speaker=row["speaker"],
        text=row["text"],
        state=row["state"],
        run_id=row["run_id"],
        error=row["error"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _round(row: Row) -> Round:
    waiting = tuple(Waiting(m, d) for m, d in json.loads(row["waiting"]))
    return Round(
        row["id"], row["room"], row["line"], waiting, row["answers"], row["pending"], row["depth"], row["state"]
    )


def _waiting(waiting: tuple[Waiting, ...]) -> str:
    return json.dumps([[w.member, w.depth] for w in waiting])


# --- rooms ------------------------------------------------------------------------------------------


async def create(db: Db, name: str, members: list[str]) -> Room:
    now = time.time()
    async with db.tx() as tx:
        row = await tx.one(
            "INSERT INTO rooms (name, members, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING RETURNING *",
            (name, json.dumps(members), now),
        )
    if row is None:
        raise Conflict(f"room {name!r} exists already: `backchannel room add {name} MEMBER` adds to it")
    return _room(row)


async def get(db: Db, name: str) -> Room:
    row = await db.one("SELECT * FROM rooms WHERE name = ?", (name,))
    if row is None:
        known = ", ".join(r.name for r in await every(db)) or "none"
        raise NotFound(
            f"no room {name!r} (rooms: {known}); make one with `backchannel room create`", code="room_not_found"
        )
    return _room(row)


async def every(db: Db) -> list[Room]:
    return [_room(r) for r in await db.all("SELECT * FROM rooms ORDER BY name")]


async def set_members(db: Db, name: str, members: list[str]) -> Room:
    async with db.tx() as tx:
        row = await tx.one("UPDATE rooms SET members = ? WHERE name = ? RETURNING *", (json.dumps(members), name))
    if row is None:
        raise NotFound(f"no room {name!r}", code="room_not_found")
    return _room(row)


async def claim(db: Db, name: str, *, owner: str, lease_seconds: float, ended: str | None = None) -> bool:
    """The room's rounds are this owner's to drive for `lease_seconds` (renewed by claiming again); False while
    another owner's lease runs, unless that owner is `ended` (known to have ended: its lease is taken at once)."""
    now = time.time()
    async with db.tx() as tx:
        changed = await tx.run(
            "UPDATE rooms SET owner = ?, lease_until = ? WHERE name = ?"
            " AND (owner IS NULL OR owner = ? OR lease_until IS NULL OR lease_until < ? OR owner = ?)",
            (owner, now + lease_seconds, name, owner, now, ended),
        )
    return changed == 1


async def driver(db: Db, name: str) -> str | None:
    """Who holds the room's lease now (None: nobody)."""
    row = await db.one("SELECT owner FROM rooms WHERE name = ?", (name,))
    return row["owner"] if row is not None else None


async def release(db: Db, name: str, *, owner: str) -> None:
    async with db.tx() as tx:
        await tx.run("UPDATE rooms SET owner = NULL, lease_until = NULL WHERE name = ? AND owner = ?", (name, owner))


async def with_open_rounds(db: Db) -> list[str]:
    """The rooms that have a round to drive, oldest first."""
    rows = await db.all("SELECT room, MIN(created_at) AS since FROM room_rounds WHERE state = 'open' GROUP BY room")
    return [r["room"] for r in sorted(rows, key=lambda r: r["since"])]


# --- members ----------------------------------------------------------------------------------------


async def member_state(db: Db, room: str, member: str) -> tuple[str | None, int]:
    """A member's room session (None: not made yet, or a peer's) and the last line it has seen."""
    row = await db.one("SELECT session_id, seen FROM room_members WHERE room = ? AND member = ?", (room, member))
    return (row["session_id"], row["seen"]) if row is not None else (None, 0)


async def set_member_session(db: Db, room: str, member: str, session_id: str | None) -> None:
    async with db.tx() as tx:
        await tx.run(
            "INSERT INTO room_members (room, member, session_id) VALUES (?, ?, ?)"
            " ON CONFLICT (room, member) DO UPDATE SET session_id = excluded.session_id",
            (room, member, session_id),
        )


# --- the transcript and its rounds --------------------------------------------------------------------


async def say(db: Db, room: str, speaker: str, text: str, members: tuple[str, ...]) -> tuple[Line, Round]:
    """The person's line, and the round it opens: every member to answer, in order."""
    now = time.time()
    round_id = "round_" + uuid.uuid4().hex
    waiting = tuple(Waiting(m) for m in members)
    async with db.tx() as tx:
        line = await _add_line(tx, room, round_id, speaker, text, SAID, now)
        row = await tx.one(
            "INSERT INTO room_rounds (id, room, line, waiting, answers, state, created_at)"
            " VALUES (?, ?, ?, ?, 0, 'open', ?) RETURNING *",
            (round_id, room, line.seq, _waiting(waiting), now),
        )
        assert row is not None
    return line, _round(row)


async def _add_line(tx: Tx, room: str, round_id: str, speaker: str, text: str, state: str, now: float) -> Line:
    row = await tx.one(
        "INSERT INTO room_lines (room, round, speaker, text, state, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING *",
        (room, round_id, speaker, text, state, now, now),
    )
    assert row is not None
    return _line(row)


async def note(db: Db, round_: Round, text: str) -> Line:
    """A line of Backchannel's own in the transcript (a cap reached, a member that could not be asked)."""
    async with db.tx() as tx:
        return await _add_line(tx, round_.room, round_.id, "backchannel", text, SAID, time.time())


async def oldest_open(db: Db, room: str) -> Round | None:
    row = await db.one(
        "SELECT * FROM room_rounds WHERE room = ? AND state = 'open' ORDER BY created_at LIMIT 1", (room,)
    )
    return _round(row) if row is not None else None


async def ask(db: Db, round_: Round, member: Waiting) -> tuple[Round, Line]:
    """`member` is asked now: its line (answering) joins the transcript, and the round says so."""
    now = time.time()
    async with db.tx() as tx:
        line = await _add_line(tx, round_.room, round_.id, member.member, "", ASKED, now)
        rest = tuple(w for w in round_.waiting if w != member)
        row = await tx.one(
            "UPDATE room_rounds SET waiting = ?, pending = ?, depth = ? WHERE id = ? RETURNING *",
            (_waiting(rest), line.seq, member.depth, round_.id),
        )
        assert row is not None
    return _round(row), line


async def answered(
    db: Db,
    round_: Round,
    line: Line,
    *,
    text: str,
    state: str,
    run_id: str | None,
    error: str | None,
    then: tuple[Waiting, ...],
) -> Round:
    """The member's answer (or why there is none) in its line; what it has seen; who answers next (`then`)."""
    now = time.time()
    async with db.tx() as tx:
        await tx.run(
            "UPDATE room_lines SET text = ?, state = ?, run_id = ?, error = ?, updated_at = ? WHERE seq = ?",
            (text, state, run_id, error, now, line.seq),
        )
        await tx.run(
            "INSERT INTO room_members (room, member, seen) VALUES (?, ?, ?)"
            " ON CONFLICT (room, member) DO UPDATE SET seen = excluded.seen",
            (round_.room, line.speaker, line.seq),
        )
        row = await tx.one(
            "UPDATE room_rounds SET waiting = ?, answers = answers + 1, pending = NULL WHERE id = ? RETURNING *",
            (_waiting(then), round_.id),
        )
        assert row is not None
    return _round(row)


async def started(db: Db, line: Line, run_id: str | None) -> None:
    """The run a member's answer is computed by, as soon as it is known (room show shows its state)."""
    async with db.tx() as tx:
        await tx.run("UPDATE room_lines SET run_id = ?, updated_at = ? WHERE seq = ?", (run_id, time.time(), line.seq))


async def close(db: Db, round_: Round) -> None:
    async with db.tx() as tx:
        await tx.run(
            "UPDATE room_rounds SET state = 'done', pending = NULL, finished_at = ? WHERE id = ?",
            (time.time(), round_.id),
        )


async def line(db: Db, seq: int) -> Line:
    row = await db.one("SELECT * FROM room_lines WHERE seq = ?", (seq,))
    if row is None:
        raise NotFound(f"no room line {seq}")
    return _line(row)


async def lines(db: Db, room: str, *, after: int = 0, before: int | None = None) -> list[Line]:
    """The room's transcript in order, after line `after` (and before line `before`)."""
    if before is None:
        rows = await db.all("SELECT * FROM room_lines WHERE room = ? AND seq > ? ORDER BY seq", (room, after))
    else:
        rows = await db.all(
            "SELECT * FROM room_lines WHERE room = ? AND seq > ? AND seq < ? ORDER BY seq", (room, after, before)
        )
    return [_line(r) for r in rows]


async def round_of(db: Db, round_id: str) -> Round:
    row = await db.one("SELECT * FROM room_rounds WHERE id = ?", (round_id,))
    if row is None:
        raise NotFound(f"no round {round_id!r}")
    return _round(row)
