"""What the store fault tests assert afterwards, read straight from state.db: every accepted message has
exactly one run, which completed once, and exactly one copy of the message and one reply in its session."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def assert_each_once(db_path: Path, tokens: list[str], *, attempts: int | None = 1) -> None:
    """Each token (a unique word in one accepted message) has one completed run (with `attempts` turns run,
    when given), its message once and one reply in its session."""
    conn = sqlite3.connect(db_path)
    try:
        for token in tokens:
            pattern = f"%{token}%"
            runs = conn.execute(
                "SELECT id, state, attempts, session_id, reply FROM runs WHERE message LIKE ?", (pattern,)
            ).fetchall()
            assert len(runs) == 1, f"{token}: {len(runs)} runs: {runs}"
            run_id, state, tries, session_id, reply = runs[0]
            assert state == "completed", f"{token}: run {run_id} is {state}"
            assert token in (reply or ""), f"{token}: run {run_id} replied {reply!r}"
            if attempts is not None:
                assert tries == attempts, f"{token}: run {run_id}'s turn ran {tries} times"
            by_role = conn.execute(
                "SELECT role, COUNT(*) FROM messages WHERE session_id = ? AND content LIKE ? GROUP BY role",
                (session_id, pattern),
            ).fetchall()
            assert dict(by_role) == {"user": 1, "assistant": 1}, f"{token}: messages by role {by_role}"
    finally:
        conn.close()
