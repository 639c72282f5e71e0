"""Read-only lookups of a home's state.db for shell completion: they never create, migrate or write a file.

SQLite opened with `mode=ro` still creates the `-wal` and `-shm` files of a WAL database when they are
missing; so a database without a `-wal` file (no writer has it open, everything is in the main file) is
opened `immutable`, which reads the main file alone, and one with a `-wal` file is opened read-only
through the files its writer keeps.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from .db import map_sqlite_errors

LIMIT = 200  # a shell shows no more than this usefully


@contextlib.contextmanager
def _reader(path: Path) -> Iterator[sqlite3.Connection | None]:
    """A read-only connection to `path`, or None when there is no database yet."""
    if not path.is_file():
        yield None
        return
    wal = path.with_name(path.name + "-wal")
    query = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    with map_sqlite_errors(path):
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?{query}", uri=True, timeout=0.5)
        try:
            yield conn
        finally:
            conn.close()


def session_ids(path: Path, *, prefix: str = "", profile: str | None = None) -> list[str]:
    """Ids of the sessions starting with `prefix` (of `profile` when given), most recently active first."""
    with _reader(path) as conn, map_sqlite_errors(path):
        if conn is None:
            return []
        sql = "SELECT id FROM sessions WHERE substr(id, 1, ?) = ?"
        args: list[object] = [len(prefix), prefix]
        if profile is not None:
            sql += " AND profile = ?"
            args.append(profile)
        rows = conn.execute(sql + " ORDER BY updated_at DESC LIMIT ?", [*args, LIMIT]).fetchall()
        return [str(r[0]) for r in rows]


def room_names(path: Path, *, prefix: str = "") -> list[str]:
    """Names of the rooms starting with `prefix` (none before the table exists: an older state.db)."""
    with _reader(path) as conn, map_sqlite_errors(path):
        if conn is None or not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'rooms'").fetchone():
            return []
        rows = conn.execute(
            "SELECT name FROM rooms WHERE substr(name, 1, ?) = ? ORDER BY name LIMIT ?", (len(prefix), prefix, LIMIT)
        ).fetchall()
        return [str(r[0]) for r in rows]


def run_ids(path: Path, *, prefix: str = "") -> list[str]:
    """Ids of the runs starting with `prefix`, newest first."""
    with _reader(path) as conn, map_sqlite_errors(path):
        if conn is None:
            return []
        rows = conn.execute(
            "SELECT id FROM runs WHERE substr(id, 1, ?) = ? ORDER BY seq DESC LIMIT ?", (len(prefix), prefix, LIMIT)
        ).fetchall()
        return [str(r[0]) for r in rows]
