"""The SQLite database of a home: one connection, WAL, named migrations applied on open.

Every sqlite3 call of the store goes through `map_sqlite_errors(path)`, which turns each `sqlite3.Error`
into a `StoreError` naming the file, with the sqlite3 error as its cause; nothing sqlite escapes the store:

    sqlite3.Error                                  -> StoreError store_unavailable (503)
     ├── OperationalError "database or disk is full" -> DiskFull store_full (503)
     ├── OperationalError "locked" / "busy"          -> StoreError: locked by another process
     ├── DatabaseError "not a database", "malformed" -> StoreError: not a usable database
     └── IntegrityError, ProgrammingError, …         -> StoreError naming the file
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from pathlib import Path
from types import TracebackType
from typing import Literal

from ..errors import DiskFull, StoreError
from ..home.config import Durability
from .driver import SQLITE, Announce, Commit, Params, Row
from .migrations import MIGRATIONS

BUSY_TIMEOUT_MS = 5000  # how long a write waits for another process's lock before it is refused
LOOP_BUSY_TIMEOUT_MS = 50  # on the event loop's connection: longer waits happen off the loop (`writable`)
GROUP_MAX_SECONDS = 0.002  # a group commit waits at most this long for more writes to join it
JOURNAL_SIZE_LIMIT = 2 * 1024 * 1024  # bytes of WAL kept when it restarts after a checkpoint; the rest is given back
log = logging.getLogger("backchannel.store")

# PRAGMA synchronous per `gateway.durability`: NORMAL loses nothing on a process crash and may lose the last
# commits (never corrupt the file) on a power loss; FULL syncs the WAL on every commit and loses none.
SYNCHRONOUS: dict[Durability, str] = {"normal": "NORMAL", "full": "FULL"}

# The group commits the current task wrote into, while `Database.tracking()` collects them (a service call).
_task_commits: ContextVar[list[Commit] | None] = ContextVar("backchannel_task_commits", default=None)


class map_sqlite_errors:
    """Translate every sqlite3 error raised inside the block into a StoreError about `path` (cause attached).

    A class rather than a generator: it wraps every statement, and costs a third as much this way."""

    __slots__ = ("path",)

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, sqlite3.Error):
            raise _translate(exc, self.path) from exc


class SqliteTx:
    """The statements of one write transaction on the home's connection (`Tx`): each runs at once, on the
    event loop, and never suspends, so no other task's statements come between them."""

    __slots__ = ("conn", "path")

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path

    # Each statement maps its own errors (`_translate`): a turn runs a dozen, and a `with` block costs three calls.
    async def one(self, sql: str, params: Params = ()) -> Row | None:
        try:
            row: Row | None = self.conn.execute(sql, params).fetchone()
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc
        return row

    async def all(self, sql: str, params: Params = ()) -> list[Row]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc

    async def run(self, sql: str, params: Params = ()) -> int:
        try:
            return self.conn.execute(sql, params).rowcount
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc

    async def many(self, sql: str, rows: Sequence[Params]) -> None:
        try:
            self.conn.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc

    async def announce(self, payload: str) -> None:
        """Nothing to do: another process notices the commit itself (`Database.data_version`)."""


class _Transaction:
    """`async with db.tx()`: the synchronous transaction of `Database.sync_tx`, entered and left on the loop."""

    __slots__ = ("block",)

    def __init__(self, db: Database) -> None:
        self.block = _SyncTx(db)

    async def __aenter__(self) -> SqliteTx:
        return SqliteTx(self.block.__enter__(), self.block.db.path)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.block.__exit__(exc_type, exc, tb)


class _SyncTx:
    """`with db.sync_tx()`: a write transaction, committed on success (or with its group), rolled back on any
    exception; sqlite3 errors of the body's statements leave as StoreError like those of BEGIN and COMMIT.

    With grouped commits (`Database.group_commits`), a savepoint of the iteration's group transaction. A class,
    not a generator: every write of every turn enters one."""

    __slots__ = ("db", "grouped")

    def __init__(self, db: Database) -> None:
        self.db = db
        self.grouped = db._loop is not None

    def __enter__(self) -> sqlite3.Connection:
        db = self.db
        try:
            if not self.grouped:
                db.conn.execute("BEGIN IMMEDIATE")
                return db.conn
            if db._group is not None and not db.conn.in_transaction:
                db._abandon_group()  # SQLite rolled the open group back on its own
            if db._group is None:
                db._open_group()
            elif db._group_written:
                db._fresh_writes += 1  # joined a group that already had writes: its commit may wait for more
            db._group_written = True
            tracked = _task_commits.get()
            if tracked is not None and (not tracked or tracked[-1] is not db._group):
                assert db._group is not None
                tracked.append(db._group)
            db.conn.execute("SAVEPOINT w")
        except sqlite3.Error as exc:
            raise _translate(exc, db.path) from exc
        return db.conn

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        db = self.db
        if exc is not None:
            if self.grouped:
                db._rollback("w")
                if db._group is not None and not db.conn.in_transaction:
                    db._abandon_group()
            else:
                db._rollback()
            if isinstance(exc, sqlite3.Error):
                raise _translate(exc, db.path) from exc
            return
        try:
            db.conn.execute("RELEASE w" if self.grouped else "COMMIT")
        except sqlite3.Error as error:
            if not self.grouped:
                db._rollback()
            raise _translate(error, db.path) from error
        if not self.grouped:
            db.commits += 1


class Database:
    """A home's `state.db` (`Db` on SQLite): one connection used by one thread; writes go through `tx()`
    (BEGIN IMMEDIATE … COMMIT).

    With `group_commits(loop)`, the transactions of one event-loop iteration become savepoints of one
    transaction committed at the end of the iteration (group commit); `await durable()` waits for it,
    and nothing that tells the outside world about a write may happen before.
    """

    dialect = SQLITE

    def __init__(self, path: Path, *, durability: Durability = "normal") -> None:
        self.path = path
        self.name = str(path)
        self.durability = durability
        self._loop: asyncio.AbstractEventLoop | None = None
        self._group: asyncio.Future[None] | None = None  # the open group transaction's commit
        self._group_started = 0.0
        self._group_written = False  # whether the open group holds a write yet (the first one is not "fresh")
        self._fresh_writes = 0
        self.commits = 0  # successful COMMITs of this connection (idle detection: data_version ignores our own)
        path.parent.mkdir(parents=True, exist_ok=True)
        with map_sqlite_errors(path):
            # one user at a time (the event loop), but it may not be the thread that opened it
            self.conn = sqlite3.connect(
                path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False
            )
        try:
            with map_sqlite_errors(path):
                self.conn.row_factory = sqlite3.Row
                self.conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
                mode = self.conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if mode != "wal":
                    raise StoreError(f"{str(path)!r}: could not switch to WAL journal (got {mode!r})")
                self.conn.execute(f"PRAGMA synchronous={SYNCHRONOUS[durability]}")
                self.conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
                self.conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except BaseException:
            self.conn.close()
            raise

    async def open(self) -> None:
        """Nothing to do: the file was opened and migrated when this was made."""

    def _migrate(self) -> None:
        with self.sync_tx() as conn:
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
        """Group the commits of each loop iteration; from now on a write never waits on the loop for a lock
        held by another process for more than LOOP_BUSY_TIMEOUT_MS (`writable` waits off the loop)."""
        self._loop = loop
        with map_sqlite_errors(self.path):
            self.conn.execute(f"PRAGMA busy_timeout={LOOP_BUSY_TIMEOUT_MS}")

    async def durable(self, commit: Commit | None = None) -> None:
        """Return once every write made so far (or those of `commit`) is committed; raise the StoreError of a
        commit that failed. At once when nothing is pending."""
        commit = self._group if commit is None else commit
        if commit is not None:
            await _committed(commit)

    def pending_commit(self) -> Commit | None:
        """The commit the writes made so far in this iteration will be part of (None: nothing pending)."""
        return self._group

    @contextmanager
    def tracking(self) -> Iterator[list[Commit]]:
        """Collect the group commits the writes of the current task (and tasks it starts) go into."""
        commits: list[Commit] = []
        token = _task_commits.set(commits)
        try:
            yield commits
        finally:
            _task_commits.reset(token)

    async def all_durable(self, commits: list[Commit]) -> None:
        """Return once each of `commits` is on disk; raise the StoreError of the first that failed."""
        for commit in commits:
            await _committed(commit)

    async def writable(self) -> None:
        """Make sure this process holds the write lock (an open group), waiting for it off the event loop.

        Another process (a CLI, a backup) may hold the lock for seconds: waiting in a sqlite3 busy handler
        on the loop would freeze every request. Waits at most BUSY_TIMEOUT_MS, then raises the locked error.
        """
        if self._loop is None:
            return
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            if self._group is not None:
                if self.conn.in_transaction:
                    return
                self._abandon_group()  # SQLite rolled the open group back on its own
            try:
                self._open_group()
                return
            except StoreError as exc:
                remaining = deadline - time.monotonic()
                if not _is_locked(exc) or remaining <= 0:
                    raise
            await asyncio.to_thread(self._wait_for_lock, remaining)

    def _wait_for_lock(self, seconds: float) -> None:
        """Block (in a worker thread) until the write lock is free or `seconds` have passed."""
        try:
            with map_sqlite_errors(self.path):
                conn = sqlite3.connect(self.path, isolation_level=None, timeout=max(seconds, 0.001))
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    conn.execute("ROLLBACK")
                finally:
                    conn.close()
        except StoreError:
            pass  # still locked: the caller sees it when it tries again

    def _commit_group(self, *, force: bool = False) -> None:
        """Commit the open group (a loop callback); its future is resolved whatever happens."""
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
            with map_sqlite_errors(self.path):
                self.conn.execute("COMMIT")
        except StoreError as exc:
            self._rollback()
            log.critical("group commit failed; the writes of this iteration are lost: %s", exc.message)
            if not group.done():
                group.set_exception(exc)
                group.exception()  # retrieved: only the waiters that care re-raise it
        except BaseException as exc:  # never leave the group's waiters hanging
            self._rollback()
            if not group.done():
                group.set_exception(StoreError(f"{str(self.path)!r}: group commit failed: {type(exc).__name__}"))
                group.exception()
            raise
        else:
            self.commits += 1
            if not group.done():
                group.set_result(None)

    def _rollback(self, savepoint: str | None = None) -> None:
        """Undo the open transaction (or savepoint) if SQLite has not already rolled it back itself.

        Called while another error propagates: a failure here is logged, the first error is the one reported.
        """
        if not self.conn.in_transaction:
            return  # SQLite rolled back on its own (e.g. a failed COMMIT, SQLITE_FULL): nothing left to undo
        try:
            with map_sqlite_errors(self.path):
                if savepoint is None:
                    self.conn.execute("ROLLBACK")
                else:
                    self.conn.execute(f"ROLLBACK TO {savepoint}")
                    self.conn.execute(f"RELEASE {savepoint}")
        except StoreError as exc:
            log.error("rollback failed: %s", exc.message)

    def tx(self) -> _Transaction:
        """A write transaction for the store's operations (`Db.tx`): see `sync_tx`."""
        return _Transaction(self)

    def sync_tx(self) -> _SyncTx:
        """A write transaction: committed on success (or with its group), rolled back on any exception (`_SyncTx`)."""
        return _SyncTx(self)

    def _open_group(self) -> None:
        """BEGIN IMMEDIATE the transaction the writes of this iteration share, its COMMIT scheduled."""
        assert self._loop is not None
        with map_sqlite_errors(self.path):
            self.conn.execute("BEGIN IMMEDIATE")
        self._group = self._loop.create_future()
        self._group_started = time.monotonic()
        self._group_written = False
        self._fresh_writes = 0
        self._loop.call_soon(self._commit_group)

    def _abandon_group(self) -> None:
        """The group's transaction is gone (rolled back by SQLite): fail its waiters now, not at COMMIT."""
        group, self._group = self._group, None
        if group is not None and not group.done():
            error = StoreError(f"{str(self.path)!r}: the transaction was rolled back; its writes are lost")
            log.critical("%s", error.message)
            group.set_exception(error)
            group.exception()

    async def all(self, sql: str, params: Params = ()) -> list[Row]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc

    async def one(self, sql: str, params: Params = ()) -> Row | None:
        try:
            row: Row | None = self.conn.execute(sql, params).fetchone()
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc
        return row

    async def write(self, sql: str, params: Params = (), *, announce: Announce = ()) -> list[Row]:
        async with self.tx() as tx:
            return await tx.all(sql, params)

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[SqliteTx]:
        """One read transaction on a connection of its own (`Db.snapshot`): in WAL mode writers go on beside it,
        and it sees none of what they commit after its first read, made here."""
        with map_sqlite_errors(self.path):
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            with map_sqlite_errors(self.path):
                conn.row_factory = sqlite3.Row
                conn.execute("PRAGMA query_only=ON")
                conn.execute("BEGIN")
                conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # the read, and its snapshot, begin
            yield SqliteTx(conn, self.path)
        finally:
            with map_sqlite_errors(self.path):
                conn.close()  # the read transaction ends with its connection: it wrote nothing

    async def other_processes(self) -> None:
        """None: SQLite cannot say who else has the file open (a home's gateway is found by its lock)."""
        return None

    def defer_checkpoints(self) -> None:
        """Stop checkpointing on commit: a long-lived process calls `checkpoint()` off its hot path instead."""
        with map_sqlite_errors(self.path):
            self.conn.execute("PRAGMA wal_autocheckpoint=0")

    def checkpoint(self, mode: Literal["PASSIVE", "TRUNCATE"] = "PASSIVE") -> bool:
        """Copy the WAL back into the database. Safe from another thread: it uses a connection of its own.

        PASSIVE never blocks writers; TRUNCATE (for idle moments) also empties the -wal file, waiting at most
        a moment for readers and writers. True when the whole WAL was copied (and, for TRUNCATE, emptied);
        a checkpoint that cannot run now runs next time, nothing is lost."""
        try:
            with map_sqlite_errors(self.path):
                conn = sqlite3.connect(self.path, isolation_level=None, timeout=LOOP_BUSY_TIMEOUT_MS / 1000)
                try:
                    conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
                    busy, _log, _done = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
                    return not busy
                finally:
                    conn.close()
        except StoreError as exc:
            log.debug("checkpoint skipped: %s", exc.message)
            return False

    def wal_pages(self) -> int:
        try:
            return (self.path.with_name(self.path.name + "-wal").stat().st_size or 0) // 4096
        except OSError:
            return 0

    async def tell(self, channel: str, payload: str) -> None:
        """Nothing: one home's gateway has no other to tell."""

    async def hear(self, channel: str, callback: Callable[[str], None]) -> None:
        """Nothing: no other gateway shares this file."""

    async def live_as(self, owner: str) -> None:
        """Nothing: an owner of this file's runs is a process of this machine, looked up by its pid."""

    async def gone(self, owners: Collection[str]) -> set[str]:
        """None known here (see `live_as`)."""
        return set()

    def data_version(self) -> int:
        """Changes when another connection commits: a cheap way to notice another process's writes."""
        with map_sqlite_errors(self.path):
            return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def close(self) -> None:
        try:
            self._commit_group(force=True)
        finally:
            with map_sqlite_errors(self.path):
                self.conn.close()

    async def aclose(self) -> None:
        self.close()


async def _committed(commit: Commit) -> None:
    """Wait for a group commit (shielded: a waiter cancelled leaves the commit alone); one that is over already is
    answered at once, its error raised (most waits are on a commit made in an earlier iteration)."""
    if commit.done():
        commit.result()
    else:
        await asyncio.shield(commit)


def _is_locked(exc: StoreError) -> bool:
    cause = exc.__cause__
    return isinstance(cause, sqlite3.OperationalError) and ("locked" in str(cause) or "busy" in str(cause))


def _translate(exc: sqlite3.Error, path: Path) -> StoreError:
    text = str(exc)
    if getattr(exc, "sqlite_errorname", "") == "SQLITE_FULL" or "database or disk is full" in text:
        return DiskFull(f"{str(path)!r} is full (the disk or the database's size limit): {text}; nothing was saved")
    if "locked" in text or "busy" in text:
        return StoreError(f"{str(path)!r} is locked by another process (waited {BUSY_TIMEOUT_MS} ms): {text}")
    if isinstance(exc, sqlite3.DatabaseError) and ("not a database" in text or "malformed" in text):
        return StoreError(f"{str(path)!r} is not a usable Backchannel database: {text}")
    return StoreError(f"{str(path)!r}: {type(exc).__name__}: {text}")
