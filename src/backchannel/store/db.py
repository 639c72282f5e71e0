"""The SQLite database of a home: one connection, WAL, named migrations applied on open.

sqlite3 errors are translated here into `StoreError`; nothing sqlite escapes the store.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import StoreError
from .migrations import MIGRATIONS

BUSY_TIMEOUT_MS = 5000
GROUP_MAX_SECONDS = 0.002  # a group commit waits at most this long for more writes to join it
log = logging.getLogger("backchannel.store")


class Database:
    """One connection used by one thread; writes go through `tx()` (BEGIN IMMEDIATE … COMMIT).

    With `group_commits(loop)`, the transactions of one event-loop iteration become savepoints of one
    transaction committed at the end of the iteration (group commit); `await durable()` waits for it,
    and nothing that tells the outside world about a write may happen before.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._loop: asyncio.AbstractEventLoop | None = None
        self._group: asyncio.Future[None] | None = None  # the open group transaction's commit
        self._group_started = 0.0
        self._fresh_writes = 0
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(
                path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False
            )  # one user at a time (the event loop), but it may not be the thread that opened it
            self.conn.row_factory = sqlite3.Row
            self.conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            mode = self.conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode != "wal":
                raise StoreError(f"{str(path)!r}: could not switch to WAL journal (got {mode!r})")
            self.conn.execute("PRAGMA synchronous=NORMAL")  # loses nothing on a process crash
            self.conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.Error as exc:
            raise _translate(exc, path) from exc

    def _migrate(self) -> None:
        with self.tx() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
            )
            applied = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}
            known = {name for name, _ in MIGRATIONS}
            unknown = sorted(applied - known)
            if unknown:
                raise StoreError(
                    f"{str(self.path)!r} was written by a newer Backchannel (unknown migrations: "
                    f"{', '.join(unknown)}); upgrade Backchannel to open it"
                )
            for name, migrate in MIGRATIONS:
                if name not in applied:
                    migrate(conn)
                    conn.execute("INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)", (name, time.time()))

    def group_commits(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    async def durable(self) -> None:
        """Return once every write made so far is committed (at once when none is pending)."""
        if self._group is not None:
            await asyncio.shield(self._group)

    def _commit_group(self, *, force: bool = False) -> None:
        group = self._group
        if group is None:
            return
        busy = self._fresh_writes and time.monotonic() - self._group_started < GROUP_MAX_SECONDS
        if busy and not force:  # writes keep coming: let the next iteration's join this commit
            self._fresh_writes = 0
            self._loop.call_soon(self._commit_group)  # type: ignore[union-attr]
            return
        self._group = None
        try:
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self.conn.execute("ROLLBACK")
            log.critical("group commit failed; the writes of this iteration are lost: %s", exc)
            group.set_exception(_translate(exc, self.path))
            group.exception()  # retrieved: only the waiters that care re-raise it
        else:
            group.set_result(None)

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: committed on success (or with its group), rolled back on any exception."""
        if self._loop is not None:
            with self._grouped() as conn:
                yield conn
            return
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        try:
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self.conn.execute("ROLLBACK")
            raise _translate(exc, self.path) from exc

    @contextmanager
    def _grouped(self) -> Iterator[sqlite3.Connection]:
        assert self._loop is not None
        try:
            if self._group is None:
                self.conn.execute("BEGIN IMMEDIATE")
                self._group = self._loop.create_future()
                self._group_started = time.monotonic()
                self._fresh_writes = 0
                self._loop.call_soon(self._commit_group)
            else:
                self._fresh_writes += 1
            self.conn.execute("SAVEPOINT w")
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK TO w")
            self.conn.execute("RELEASE w")
            raise
        self.conn.execute("RELEASE w")

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc

    def one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        try:
            row: sqlite3.Row | None = self.conn.execute(sql, params).fetchone()
            return row
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc

    def defer_checkpoints(self) -> None:
        """Stop checkpointing on commit: a long-lived process calls `checkpoint()` off its hot path instead."""
        self.conn.execute("PRAGMA wal_autocheckpoint=0")

    def checkpoint(self) -> None:
        """Copy the WAL back into the database (PASSIVE: never blocks writers). Safe from another thread:
        it uses a connection of its own."""
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error:
            pass  # a checkpoint that cannot run now runs next time; nothing is lost either way
        finally:
            conn.close()

    def wal_pages(self) -> int:
        try:
            return (self.path.with_name(self.path.name + "-wal").stat().st_size or 0) // 4096
        except OSError:
            return 0

    def data_version(self) -> int:
        """Changes when another connection commits: a cheap way to notice another process's writes."""
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def close(self) -> None:
        self._commit_group(force=True)
        self.conn.close()


def _translate(exc: sqlite3.Error, path: Path) -> StoreError:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return StoreError(f"{str(path)!r} is locked by another process (waited {BUSY_TIMEOUT_MS} ms): {text}")
    if isinstance(exc, sqlite3.DatabaseError) and ("not a database" in text or "malformed" in text):
        return StoreError(f"{str(path)!r} is not a usable Backchannel database: {text}")
    return StoreError(f"{str(path)!r}: {text}")
