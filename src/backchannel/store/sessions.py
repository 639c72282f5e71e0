"""Sessions and their messages: create, find, list, append (inside a caller's transaction), read."""

from __future__ import annotations

import json
import time

from ..errors import Conflict, LimitReached, NotFound, StoreError, UsageError
from ..ids import BOT_CHAT_TITLE as BOT_CHAT_TITLE  # what the surfaces and the core name it by
from ..ids import CLIENT_SESSION_ID_RE, new_session_id
from ..messages import Message, ToolCall
from ..records import Session
from .driver import Db, Row, Tx


def _session(row: Row) -> Session:
    return Session(
        id=row["id"],
        profile=row["profile"],
        title=row["title"],
        source=row["source"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        message_count=row["message_count"],
        remote_id=row["remote_id"],
    )


async def create_session(
    db: Db,
    profile: str,
    *,
    title: str | None = None,
    source: str = "cli",
    session_id: str | None = None,
    remote_id: str | None = None,
    limit: int | None = None,
) -> Session:
    if session_id is not None and not CLIENT_SESSION_ID_RE.match(session_id):
        raise UsageError(
            f"invalid session id {session_id!r}: use letters, digits, '_', '.', '-' (1-128)", code="invalid_session_id"
        )
    async with db.tx() as tx:
        return await insert_session(
            tx, profile, title=title, source=source, session_id=session_id, remote_id=remote_id, limit=limit
        )


async def insert_session(
    tx: Tx,
    profile: str,
    *,
    title: str | None = None,
    source: str = "cli",
    session_id: str | None = None,
    remote_id: str | None = None,
    limit: int | None = None,
) -> Session:
    """A new session, inside the caller's transaction (its id checked by the caller)."""
    now = time.time()
    title = title.strip() if title else None
    sid = session_id or new_session_id(now)
    if await tx.one("SELECT 1 FROM sessions WHERE id = ?", (sid,)):
        raise Conflict(f"session {sid!r} already exists", code="session_exists")
    if title is not None:
        taken = await tx.one("SELECT id FROM sessions WHERE profile = ? AND title = ?", (profile, title))
        if taken:
            raise UsageError(f"Title already in use by session {taken[0]}", code="invalid_title")
    if limit is not None:
        counted = await tx.one("SELECT COUNT(*) FROM sessions WHERE profile = ?", (profile,))
        count = int(counted[0]) if counted is not None else 0
        if count >= limit:
            raise LimitReached(
                f"profile {profile!r} has {count} sessions (gateway.max_sessions_per_profile is {limit}); "
                "remove some, or raise the limit",
                code="too_many_sessions",
            )
    await tx.run(
        "INSERT INTO sessions (id, profile, title, source, created_at, updated_at, remote_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (sid, profile, title, source, now, now, remote_id),
    )
    return Session(sid, profile, title, source, now, now, 0, remote_id)


async def get_session(db: Db, session_id: str, *, profile: str | None = None) -> Session:
    row = await db.one("SELECT * FROM sessions WHERE id = ?", (session_id,))
    if row is None or (profile is not None and row["profile"] != profile):
        where = f" in profile {profile!r}" if profile is not None else ""
        raise NotFound(f"no session {session_id!r}{where}", code="session_not_found")
    return _session(row)


async def find_by_title(db: Db, profile: str, title: str) -> Session | None:
    row = await db.one("SELECT * FROM sessions WHERE profile = ? AND title = ?", (profile, title.strip()))
    return _session(row) if row else None


async def find_by_remote_id(db: Db, profile: str, remote_id: str) -> Session | None:
    """The session of `profile` known elsewhere as `remote_id`: its own id, or the remote id it records."""
    row = await db.one("SELECT * FROM sessions WHERE id = ? AND profile = ?", (remote_id, profile)) or await db.one(
        "SELECT * FROM sessions WHERE profile = ? AND remote_id = ? ORDER BY updated_at DESC", (profile, remote_id)
    )
    return _session(row) if row else None


async def set_remote_id(db: Db, session_id: str, remote_id: str) -> None:
    """Record the id a session has in the gateway that holds it (it changes when that gateway rotates it)."""
    async with db.tx() as tx:
        await tx.run("UPDATE sessions SET remote_id = ? WHERE id = ?", (remote_id, session_id))


async def retitle(db: Db, profile: str, title: str, new_title: str) -> Session | None:
    """Give the profile's session titled `title` another title (a removed profile's Bot Chat); None when it has none."""
    async with db.tx() as tx:
        row = await tx.one(
            "UPDATE sessions SET title = ? WHERE profile = ? AND title = ? RETURNING *", (new_title, profile, title)
        )
    return _session(row) if row is not None else None


async def bot_chat(db: Db, profile: str) -> Session:
    """The profile's canonical Bot Chat, created on first use (never twice: the title is unique)."""
    found = await find_by_title(db, profile, BOT_CHAT_TITLE)
    if found is not None:
        return found
    try:
        return await create_session(db, profile, title=BOT_CHAT_TITLE, source="bot")
    except (UsageError, StoreError):  # another writer created it between our read and our write
        found = await find_by_title(db, profile, BOT_CHAT_TITLE)
        if found is None:
            raise
        return found


async def list_sessions(
    db: Db, profile: str | None = None, *, title: str | None = None, limit: int = 50, offset: int = 0
) -> list[Session]:
    clauses, params = [], []
    if profile is not None:
        clauses.append("profile = ?")
        params.append(profile)
    if title is not None:
        clauses.append("title = ?")
        params.append(title.strip())
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = await db.all(
        f"SELECT * FROM sessions {where} ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?",
        (*params, limit, offset),
    )
    return [_session(r) for r in rows]


def tool_calls_json(message: Message) -> str | None:
    """A message's tool calls as the messages table keeps them."""
    return json.dumps([tc.to_dict() for tc in message.tool_calls]) if message.tool_calls else None


async def append_messages(tx: Tx, session_id: str, messages: list[Message], *, run_id: str | None) -> None:
    """Append inside the caller's transaction, so messages and a run's state commit together."""
    now = time.time()
    await tx.many(
        "INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id, name, run_id, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                session_id,
                m.role,
                m.content,
                tool_calls_json(m),
                m.tool_call_id,
                m.name,
                run_id,
                now,
            )
            for m in messages
        ],
    )
    await tx.run(
        "UPDATE sessions SET updated_at = ?, message_count = message_count + ? WHERE id = ?",
        (now, len(messages), session_id),
    )


async def list_messages(db: Db, session_id: str) -> list[Message]:
    rows = await db.all(
        "SELECT role, content, tool_calls, tool_call_id, name, run_id, created_at FROM messages"
        " WHERE session_id = ? ORDER BY id",
        (session_id,),
    )
    return [
        Message(
            role=r["role"],
            content=r["content"],
            tool_calls=tuple(ToolCall(**tc) for tc in json.loads(r["tool_calls"])) if r["tool_calls"] else (),
            tool_call_id=r["tool_call_id"],
            name=r["name"],
            run_id=r["run_id"],
            created_at=r["created_at"],
        )
        for r in rows
    ]
