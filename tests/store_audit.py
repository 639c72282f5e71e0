"""What the fault tests assert in the store afterwards: every accepted message has exactly one run, one
reply and one delivery to its sender.

Read straight from state.db (read-only), after the fault, so no code under test can paper over it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backchannel import keys
from backchannel.home import config


@dataclass(frozen=True)
class Audited:
    run: dict[str, Any]
    wake: dict[str, Any] | None  # the wake-up run in the sender's session, when the sender stopped waiting


def _connect(root: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{config.db_path(root)}?mode=ro", uri=True, timeout=10)
    conn.row_factory = sqlite3.Row
    return conn


def runs_by_key(root: Path, key: str) -> list[dict[str, Any]]:
    with _connect(root) as conn:
        return [dict(r) for r in conn.execute("SELECT * FROM runs WHERE idempotency_key = ?", (key,))]


def runs_with_text(root: Path, text: str) -> list[dict[str, Any]]:
    """Runs whose message contains `text` (for messages sent without a key of ours)."""
    with _connect(root) as conn:
        rows = conn.execute("SELECT * FROM runs WHERE instr(message, ?) > 0 ORDER BY seq", (text,))
        return [dict(r) for r in rows]


def audit_run(root: Path, run: dict[str, Any], *, state: str = "completed") -> Audited:
    """One run: in `state`, its message and reply in its session once each, its sender woken once if it asked."""
    assert run["state"] == state, f"run {run['id']} is {run['state']!r}, expected {state!r}: {run}"
    with _connect(root) as conn:
        msgs = [dict(m) for m in conn.execute("SELECT * FROM messages WHERE run_id = ? ORDER BY id", (run["id"],))]
        wakes = [dict(r) for r in conn.execute("SELECT * FROM runs WHERE idempotency_key = ?", (keys.wake(run["id"]),))]
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
