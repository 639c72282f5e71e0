"""What the fault tests assert in the store afterwards: every accepted message has exactly one run, one
reply and one delivery to its sender.

Read straight from the store after the fault (state.db opened read-only, or the home's shared PostgreSQL store), so
no code under test can paper over it.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backchannel import keys
from backchannel.home import config
from backchannel.store import backend


@dataclass(frozen=True)
class Audited:
    run: dict[str, Any]
    wake: dict[str, Any] | None  # the wake-up run in the sender's session, when the sender stopped waiting


def _rows(root: Path, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """The rows `sql` reads from the home's store."""
    settings = config.load_gateway_config(root)
    if not backend.is_shared(settings):
        conn = sqlite3.connect(f"file:{config.db_path(root)}?mode=ro", uri=True, timeout=10)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params)]
        finally:
            conn.close()
    found: list[dict[str, Any]] = []
    failed: list[BaseException] = []

    async def read() -> None:
        db = backend.open_store(root, settings)
        await db.open()
        try:
            found.extend(dict(r.items()) for r in await db.all(sql, params))
        finally:
            await db.aclose()

    def run() -> None:  # a loop of its own, whatever the caller runs
        try:
            asyncio.run(read())
        except BaseException as exc:
            failed.append(exc)

    reader = threading.Thread(target=run)
    reader.start()
    reader.join()
    if failed:
        raise failed[0]
    return found


def runs_by_key(root: Path, key: str) -> list[dict[str, Any]]:
    return _rows(root, "SELECT * FROM runs WHERE idempotency_key = ?", (key,))


def runs_with_text(root: Path, text: str) -> list[dict[str, Any]]:
    """Runs whose message contains `text` (for messages sent without a key of ours)."""
    return [r for r in _rows(root, "SELECT * FROM runs ORDER BY seq") if text in r["message"]]


def audit_run(root: Path, run: dict[str, Any], *, state: str = "completed") -> Audited:
    """One run: in `state`, its message and reply in its session once each, its sender woken once if it asked."""
    msgs = _rows(root, "SELECT * FROM messages WHERE run_id = ? ORDER BY id", (run["id"],))
    wakes = _rows(root, "SELECT * FROM runs WHERE idempotency_key = ?", (keys.wake(run["id"]),))
    return check_run(run, msgs, wakes, state=state)


def check_run(
    run: dict[str, Any], msgs: list[dict[str, Any]], wakes: list[dict[str, Any]], *, state: str = "completed"
) -> Audited:
    """`audit_run` on rows already read: the run, its messages (in order) and the wake-up runs of its sender."""
    assert run["state"] == state, f"run {run['id']} is {run['state']!r}, expected {state!r}: {run}"
    users = [m for m in msgs if m["role"] == "user"]
    if state == "completed":
        assert len(users) == 1, f"run {run['id']}: its message is in the session {len(users)} times: {msgs}"
        replies = [m for m in msgs if m["role"] == "assistant" and m["content"] == run["reply"]]
        assert run["reply"], f"run {run['id']} completed without a reply"
        assert len(replies) == 1, f"run {run['id']}: its reply is in the session {len(replies)} times: {msgs}"
    else:  # a turn stopped while running keeps what it had (its message once, any partial output)
        assert len(users) <= 1, f"run {run['id']} ended {state!r} with its message in the session twice: {msgs}"
    if run["wake"] and run["sender_session"]:
        assert len(wakes) == 1, f"run {run['id']}: its sender was woken {len(wakes)} times: {wakes}"
        assert wakes[0]["session_id"] == run["sender_session"], wakes[0]
        return Audited(run, wakes[0])
    assert not wakes, f"run {run['id']}: a sender that waited was woken anyway: {wakes}"
    return Audited(run, None)


def audit_key(root: Path, key: str, *, state: str = "completed") -> Audited:
    """The message sent under `key` has exactly one run (in `state`), one reply and one delivery."""
    found = runs_by_key(root, key)
    assert len(found) == 1, f"key {key!r} has {len(found)} runs: {found}"
    return audit_run(root, found[0], state=state)


def audit_texts(root: Path, tokens: list[str], *, attempts: int | None = 1) -> None:
    """Each token (a unique word of one accepted message, sent without a key of ours) has one completed
    run whose reply names it (with `attempts` turns run, when given), its message and reply once each."""
    for token in tokens:
        found = runs_with_text(root, token)
        assert len(found) == 1, f"{token}: {len(found)} runs: {found}"
        run = audit_run(root, found[0]).run
        assert token in (run["reply"] or ""), f"{token}: run {run['id']} replied {run['reply']!r}"
        if attempts is not None:
            assert run["attempts"] == attempts, f"{token}: run {run['id']}'s turn ran {run['attempts']} times"


@dataclass(frozen=True)
class Snapshot:
    """The runs and messages of a store read once (a shared store is read over the network: one read, not one
    per message audited)."""

    runs: list[dict[str, Any]]
    messages: list[dict[str, Any]]

    def by_key(self, key: str) -> list[dict[str, Any]]:
        return [r for r in self.runs if r["idempotency_key"] == key]

    def audit_key(self, key: str, *, state: str = "completed") -> Audited:
        found = self.by_key(key)
        assert len(found) == 1, f"key {key!r} has {len(found)} runs: {found}"
        run = found[0]
        msgs = [m for m in self.messages if m["run_id"] == run["id"]]
        return check_run(run, msgs, self.by_key(keys.wake(run["id"])), state=state)


def snapshot(root: Path) -> Snapshot:
    return Snapshot(_rows(root, "SELECT * FROM runs ORDER BY seq"), _rows(root, "SELECT * FROM messages ORDER BY id"))


def session_owners(root: Path) -> dict[str, tuple[str | None, int]]:
    """Each session's owning gateway (its owner mark, None: nobody) and epoch."""
    return {r["id"]: (r["owner"], int(r["epoch"])) for r in _rows(root, "SELECT id, owner, epoch FROM sessions")}
