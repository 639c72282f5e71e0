"""The PostgreSQL store's database (`Db` on PostgreSQL): an asyncpg pool, the schema migrated on open, other
gateways' commits heard through LISTEN.

The store's SQL is written once with sqlite3's `?` placeholders; here each distinct statement is rewritten once
to PostgreSQL's `$1, $2, …` (`dollar_params`). Each `tx()` is one transaction on one pooled connection,
committed when its block ends: `durable()` has nothing left to wait for. Every asyncpg error leaves as a
StoreError naming the database by its URL without the password (store/pg_errors.py).

Writers that change what other gateways wait on announce it in their transaction (`PgTx.announce`); the
announcements are sent once it has committed, coalesced (store/pg_notices.py); `data_version()` moves on when
another gateway's announcement arrives (store/pg_changes.py).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import asyncpg

from ..errors import StoreError
from .driver import POSTGRESQL, Announce, Commit, Params, Row
from .pg_changes import NOTIFY_SQL, ChangeListener
from .pg_errors import map_pg_errors, redact_url, translate, url_secrets
from .pg_liveness import GONE_SQL
from .pg_migrations import apply_migrations
from .pg_notices import Notices

if TYPE_CHECKING:
    from .driver import Db

__all__ = ["NOTIFY_SQL", "PgDatabase", "PgTx", "dollar_params", "rowcount"]

APPLICATION_NAME = "backchannel"  # how the pool's connections show in pg_stat_activity
LISTENER_NAME = "backchannel-listen"  # and the connection that listens for other gateways' changes
CLOSE_SECONDS = 10.0  # how long aclose() waits for borrowed connections before it cuts them
IDLE_CONNECTION_SECONDS = 60.0  # a pooled connection unused this long is closed (a quiet gateway keeps one)
log = logging.getLogger("backchannel.store")

# A quoted literal or identifier, a comment, or a placeholder: only the last is rewritten. Literals are
# standard SQL ('it''s'); the store's SQL writes no E'…' or dollar-quoted strings.
_SQL_TOKEN = re.compile(r"'(?:[^']|'')*'?|\"(?:[^\"]|\"\")*\"?|--[^\n]*|/\*.*?(?:\*/|$)|\?", re.DOTALL)


@lru_cache(maxsize=4096)
def dollar_params(sql: str) -> str:
    """`sql` with sqlite3's `?` placeholders numbered as PostgreSQL's `$1, $2, …`, leaving any `?` inside a
    quoted literal, a quoted identifier or a comment alone. Each distinct statement is rewritten once."""
    count = 0

    def number(match: re.Match[str]) -> str:
        nonlocal count
        if match.group() != "?":
            return match.group()
        count += 1
        return f"${count}"

    return _SQL_TOKEN.sub(number, sql)


def rowcount(status: str) -> int:
    """The rows a statement changed, from asyncpg's status: "UPDATE 3" -> 3, "INSERT 0 1" -> 1, "CREATE
    TABLE" -> 0."""
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


class PgTx:
    """The statements of one transaction on one pooled connection (`Tx`): they run in order, and PostgreSQL
    keeps other transactions' uncommitted writes out of their sight."""

    __slots__ = ("announced", "conn", "name", "secrets")

    def __init__(self, conn: asyncpg.pool.PoolConnectionProxy[Any], name: str, secrets: tuple[str, ...]) -> None:
        self.conn = conn
        self.name = name
        self.secrets = secrets
        self.announced: list[str] = []

    async def one(self, sql: str, params: Params = ()) -> Row | None:
        with map_pg_errors(self.name, self.secrets):
            row: Row | None = await self.conn.fetchrow(dollar_params(sql), *params)
            return row

    async def all(self, sql: str, params: Params = ()) -> list[Row]:
        with map_pg_errors(self.name, self.secrets):
            rows: list[Row] = await self.conn.fetch(dollar_params(sql), *params)
            return rows

    async def run(self, sql: str, params: Params = ()) -> int:
        with map_pg_errors(self.name, self.secrets):
            return rowcount(await self.conn.execute(dollar_params(sql), *params))

    async def many(self, sql: str, rows: Sequence[Params]) -> None:
        if not rows:
            return
        with map_pg_errors(self.name, self.secrets):
            await self.conn.executemany(dollar_params(sql), rows)

    async def announce(self, payload: str) -> None:
        """Tell the other gateways, once this transaction commits, that something changed (`payload`: a run's id,
        under 8000 bytes): sent after the commit (`Notices`), with no round trip here. Nothing is told if the
        transaction is rolled back."""
        self.announced.append(payload)


async def _reset(conn: asyncpg.Connection[Any]) -> None:
    """A connection given back to the pool: rolled back if a block left its transaction open (a cancelled one),
    else as it is, with no round trip. asyncpg's own reset (advisory locks, LISTEN, session settings, cursors)
    has nothing to undo here: pooled connections take transaction-level locks only, listen on none (the
    listener has a connection of its own), change no setting and hold no cursor past their block."""
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


class PgDatabase:
    """A PostgreSQL database several gateways share (`Db` on PostgreSQL). Making it does no I/O; `open()`
    connects a pool of `pool_size` connections, migrates and starts listening; `aclose()` lets it all go.

    `connect_timeout` bounds making a connection, `command_timeout` a statement, and `acquire_timeout` the wait
    for a free pooled connection; `statement_cache_size=0` suits a pooler that does not keep prepared statements
    (PgBouncer in transaction mode)."""

    dialect = POSTGRESQL

    def __init__(
        self,
        url: str,
        *,
        password: str | None = None,
        pool_size: int = 16,
        connect_timeout: float = 10.0,
        command_timeout: float = 30.0,
        acquire_timeout: float = 30.0,
        statement_cache_size: int = 100,
    ) -> None:
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, not {pool_size}")
        self._url = url
        self._password = password  # for a URL without one (the home's .env holds it)
        self.name = redact_url(url)
        self._secrets = (*url_secrets(url), *((password,) if password else ()))
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self.acquire_timeout = acquire_timeout
        self.statement_cache_size = statement_cache_size
        self.commits = 0  # this process's successful COMMITs
        self.migrated: list[str] = []  # the migrations open() applied (none when another gateway had)
        self._pool: asyncpg.Pool[Any] | None = None
        self._own_pids: set[int] = set()  # the server processes of the pool's connections
        self._notices = Notices(self._connection, name=self.name)
        self._changes = ChangeListener(
            self._listener_connection, name=self.name, secrets=self._secrets, own_pids=self._own_pids
        )
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"PgDatabase({self.name!r})"

    async def open(self) -> None:
        """Connect the pool, apply the migrations this database lacks, and start listening for changes."""
        if self._pool is not None:
            raise StoreError(f"{self.name!r} is already open")
        with map_pg_errors(self.name, self._secrets):
            pool = await asyncpg.create_pool(
                self._url,
                password=self._password,
                min_size=1,
                max_size=self.pool_size,  # opened as turns need them, closed once idle: the pool follows the load
                max_inactive_connection_lifetime=IDLE_CONNECTION_SECONDS,
                timeout=self.connect_timeout,
                command_timeout=self.command_timeout,
                statement_cache_size=self.statement_cache_size,
                server_settings={"application_name": APPLICATION_NAME},
                init=self._init_connection,
                reset=_reset,
            )
        try:
            with map_pg_errors(self.name, self._secrets):
                async with pool.acquire(timeout=self.acquire_timeout) as conn:
                    self.migrated = await apply_migrations(conn, name=self.name)
            await self._changes.start()
            self._notices.start()
        except BaseException:
            pool.terminate()
            raise
        self._pool = pool
        if self.migrated:
            log.info("%r migrated: %s", self.name, ", ".join(self.migrated))

    async def _init_connection(self, conn: asyncpg.Connection[Any]) -> None:
        """Each new pooled connection: its server process is this gateway's (its notices are not counted)."""
        pid = conn.get_server_pid()
        self._own_pids.add(pid)
        conn.add_termination_listener(lambda _conn: self._own_pids.discard(pid))

    async def _listener_connection(self) -> asyncpg.Connection[Any]:
        conn: asyncpg.Connection[Any] = await asyncpg.connect(
            self._url,
            password=self._password,
            timeout=self.connect_timeout,
            command_timeout=self.command_timeout,
            server_settings={"application_name": LISTENER_NAME},
        )
        return conn

    def _require_pool(self) -> asyncpg.Pool[Any]:
        if self._pool is None:
            raise StoreError(f"{self.name!r} is not open")
        return self._pool

    async def aclose(self) -> None:
        """Stop listening and close the pool (connections still borrowed are cut after CLOSE_SECONDS)."""
        await self._notices.close()  # what committed transactions announced goes before the pool does
        await self._changes.close()
        pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            async with asyncio.timeout(CLOSE_SECONDS):
                await pool.close()
        except (TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
            log.warning("closing %r: cutting its connections (%s)", self.name, type(exc).__name__)
            pool.terminate()

    @asynccontextmanager
    async def tx(self) -> AsyncIterator[PgTx]:
        """A transaction on one pooled connection: committed when the block ends, rolled back (every statement
        of it) when the block raises. A failed COMMIT raises its StoreError: nothing of the block was saved."""
        async with self._connection() as conn:
            transaction = conn.transaction()
            with map_pg_errors(self.name, self._secrets):
                await transaction.start()
            tx = PgTx(conn, self.name, self._secrets)
            try:
                yield tx
            except BaseException:
                await self._rollback(transaction)
                raise
            with map_pg_errors(self.name, self._secrets):
                await transaction.commit()
            self.commits += 1
            self._notices.committed(tx.announced)

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[asyncpg.pool.PoolConnectionProxy[Any]]:
        """A pooled connection for the block, given back after it."""
        pool = self._require_pool()
        try:
            conn = await pool.acquire(timeout=self.acquire_timeout)
        except TimeoutError as exc:
            raise StoreError(
                f"{self.name!r}: none of the pool's {self.pool_size} connections came free (or could be made)"
                f" within {self.acquire_timeout:g}s"
            ) from exc
        except (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError) as exc:
            raise translate(exc, self.name, self._secrets) from exc
        try:
            yield conn
        finally:
            await self._release(pool, conn)

    async def _release(self, pool: asyncpg.Pool[Any], conn: asyncpg.pool.PoolConnectionProxy[Any]) -> None:
        """Give the connection back: a connection that cannot be reset is closed by the pool, and the block's
        outcome (committed, or its error) stays the one reported."""
        try:
            await pool.release(conn)
        except (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError) as exc:
            log.warning("%r: a connection could not be reset, it is closed: %s", self.name, type(exc).__name__)

    async def _rollback(self, transaction: asyncpg.transaction.Transaction) -> None:
        """Undo the block's statements while its error propagates: a failure here is logged (the connection is
        gone, and the server rolled back with it); the block's error is the one reported."""
        try:
            with map_pg_errors(self.name, self._secrets):
                await transaction.rollback()
        except StoreError as exc:
            log.error("rollback failed: %s", exc.message)

    async def one(self, sql: str, params: Params = ()) -> Row | None:
        async with self._connection() as conn:
            with map_pg_errors(self.name, self._secrets):
                row: Row | None = await conn.fetchrow(dollar_params(sql), *params)
                return row

    async def all(self, sql: str, params: Params = ()) -> list[Row]:
        async with self._connection() as conn:
            with map_pg_errors(self.name, self._secrets):
                rows: list[Row] = await conn.fetch(dollar_params(sql), *params)
                return rows

    async def write(self, sql: str, params: Params = (), *, announce: Announce = ()) -> list[Row]:
        """One statement in autocommit: one round trip (`Db.write`)."""
        rows = await self.all(sql, params)
        self.commits += 1
        self._notices.committed(announce(rows) if callable(announce) else announce)
        return rows

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[PgTx]:
        """A REPEATABLE READ, READ ONLY transaction on one pooled connection (`Db.snapshot`): its snapshot is
        taken by its first read, made here; what other gateways commit after it is not seen."""
        async with self._connection() as conn:
            transaction = conn.transaction(isolation="repeatable_read", readonly=True)
            with map_pg_errors(self.name, self._secrets):
                await transaction.start()
            try:
                with map_pg_errors(self.name, self._secrets):
                    await conn.fetchval("SELECT COUNT(*) FROM store_meta")
                yield PgTx(conn, self.name, self._secrets)
            finally:
                await self._rollback(transaction)  # it wrote nothing: its end is all there is to do

    async def other_processes(self) -> int:
        """The other processes that have this store open: each (a gateway, a command working in-process) listens
        for changes on a connection of its own, named LISTENER_NAME in pg_stat_activity."""
        row = await self.one(
            "SELECT COUNT(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = ? AND pid <> ?",
            (LISTENER_NAME, self._changes.pid or 0),
        )
        return int(row[0]) if row is not None else 0

    def group_commits(self, loop: asyncio.AbstractEventLoop) -> None:
        """Nothing to group: each transaction commits when its block ends. The loop is kept."""
        self._loop = loop

    async def writable(self) -> None:
        """Nothing to wait for: PostgreSQL takes many writers at once."""

    async def durable(self, commit: Commit | None = None) -> None:
        """At once: every transaction was committed when its block ended."""

    def pending_commit(self) -> Commit | None:
        return None

    @contextmanager
    def tracking(self) -> Iterator[list[Commit]]:
        """No commits to collect: the list stays empty."""
        yield []

    async def all_durable(self, commits: list[Commit]) -> None:
        """At once (see `durable`)."""

    async def tell(self, channel: str, payload: str) -> None:
        """A notice on `channel` to every other gateway of the store (committed at once: no transaction)."""
        async with self._require_pool().acquire(timeout=self.acquire_timeout) as conn:
            with map_pg_errors(self.name, self._secrets):
                await conn.execute("SELECT pg_notify($1, $2)", channel, payload)

    async def hear(self, channel: str, callback: Callable[[str], None]) -> None:
        """`callback(payload)` for each notice another gateway sends on `channel`."""
        await self._changes.hear(channel, callback)

    def data_version(self) -> int:
        """Moves on when another gateway's announcement (`NOTIFY_SQL`) commits, and after listening anew."""
        return self._changes.version

    async def sync_changes(self) -> None:
        """Return once every announcement sent before this call is counted in `data_version()`."""
        await self._changes.caught_up()

    async def notices_sent(self) -> None:
        """Return once what this process's committed transactions announced has been sent."""
        await self._notices.flushed()

    async def live_as(self, owner: str) -> None:
        """Hold `owner`'s liveness lock while this process lives (`pg_liveness`)."""
        await self._changes.live_as(owner)

    async def gone(self, owners: Collection[str]) -> set[str]:
        """Of `owners`, those whose process holds no liveness lock: ended, on whatever machine."""
        if not owners:
            return set()
        return {row[0] for row in await self.all(GONE_SQL, (sorted(owners),))}


if TYPE_CHECKING:

    def _is_a_db(db: PgDatabase) -> Db:  # mypy holds PgDatabase to the Db protocol here
        return db
