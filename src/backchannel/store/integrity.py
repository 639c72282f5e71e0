"""Is state.db intact? SQLite's own checks, and the commands that save what a damaged one still holds.

`problems(path)` runs `PRAGMA quick_check` (reads every page: about 20 ms for a store of 3,000 runs,
seconds for a large one) or, with `deep=True`, `PRAGMA integrity_check` (also every index against its
table: for `backchannel doctor --deep`). `require_intact(path)` refuses a damaged store with a StoreError
(`store_damaged`) that says what to type to back it up and recover it; every opener of a home's store
calls it (`store.backend.open_store`). A database that is merely locked or unreadable is not called
damaged: that error is raised as the store reports it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..errors import StoreError
from .db import BUSY_TIMEOUT_MS, map_sqlite_errors

MAX_PROBLEMS = 10  # SQLite stops after this many; the first few say enough

# The stores this process found intact, each with its files' sizes and times then: a command that opens its store
# twice (`send` resolves the address, then delivers) checks it once, and again only after something wrote to it.
_intact: set[tuple[Path, tuple[int, ...]]] = set()


def problems(path: Path, *, deep: bool = False) -> list[str]:
    """What SQLite finds wrong with the database at `path`: [] when it is intact (or does not exist yet)."""
    if not path.exists():
        return []
    pragma = "integrity_check" if deep else "quick_check"
    try:
        with map_sqlite_errors(path):
            # read-only: a check never writes, not even the checkpoint a last connection makes on close
            uri = path.resolve().as_uri() + "?mode=ro"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
            try:
                rows = conn.execute(f"PRAGMA {pragma}({MAX_PROBLEMS})").fetchall()
            finally:
                conn.close()
    except StoreError as exc:
        if _is_damage(exc.__cause__):
            return [str(exc.__cause__)]
        raise
    found = [str(row[0]) for row in rows]
    return [] if found == ["ok"] else found


def require_intact(path: Path, *, deep: bool = False) -> None:
    """Raise StoreError `store_damaged` when the database at `path` is damaged, with the recovery to type."""
    seen = (path.resolve(), _fingerprint(path))
    if not deep and seen in _intact:
        return
    found = problems(path, deep=deep)
    if not found:
        _intact.add(seen)
        return
    check = "integrity_check" if deep else "quick_check"
    shown = "; ".join(found[:3]) + (f" (and {len(found) - 3} more)" if len(found) > 3 else "")
    steps = "\n".join(f"  {command}" for command in recovery_commands(path))
    raise StoreError(
        f"{str(path)!r} is damaged (PRAGMA {check}: {shown}); nothing was started or written. "
        "Stop everything that uses this home, then back it up and recover what it still holds "
        f"(sqlite3 command-line shell 3.29 or newer; on Windows use copy, del and move):\n{steps}",
        code="store_damaged",
    )


def recovery_commands(path: Path) -> list[str]:
    """The shell commands that back a damaged database up and replace it with what `.recover` saves."""
    db = f'"{path}"'
    wal, shm = (f'"{path.with_name(path.name + suffix)}"' for suffix in ("-wal", "-shm"))
    backup = f'"{path.with_name(path.name + ".damaged")}"'
    recovered = f'"{path.with_name(path.stem + ".recovered" + path.suffix)}"'
    return [
        f"cp {db} {backup}" + (f' && cp {wal} {backup[:-1]}-wal"' if _exists(path, "-wal") else ""),
        f"sqlite3 {db} .recover | sqlite3 {recovered}",
        f'sqlite3 {recovered} "PRAGMA integrity_check"        # prints: ok',
        f"rm -f {wal} {shm} && mv {recovered} {db}",
    ]


def _fingerprint(path: Path) -> tuple[int, ...]:
    """The size and modification time of the database and of its WAL (-1 where there is none): a write, by this
    process or another, changes them."""
    found: list[int] = []
    for file in (path, path.with_name(path.name + "-wal")):
        try:
            stat = file.stat()
        except OSError:
            found += [-1, -1]
        else:
            found += [stat.st_size, stat.st_mtime_ns]
    return tuple(found)


def _exists(path: Path, suffix: str) -> bool:
    return path.with_name(path.name + suffix).exists()


def _is_damage(error: BaseException | None) -> bool:
    if not isinstance(error, sqlite3.DatabaseError):
        return False
    text = str(error)
    return "malformed" in text or "not a database" in text or getattr(error, "sqlite_errorname", "") == "SQLITE_CORRUPT"
