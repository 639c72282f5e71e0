"""What the store's operations are written against: one database, SQLite or PostgreSQL, the same calls.

Each operation of the store (`runs`, `sessions`, `outbound`, …) is one async function over a `Db`. Its SQL is
written once, with `?` placeholders, in the SQL both engines speak; where they differ, the operation asks the
`Dialect` for the fragment (a prefix match, a row lock). Two drivers implement `Db`:

- `store.db.Database`: a home's `state.db`, one sqlite3 connection on the event loop. Its statements never
  suspend; the writes of one loop iteration commit together (group commit) and `durable()` awaits that commit.
- `store.pg.PgDatabase`: a PostgreSQL database shared by several gateways, an asyncpg pool. Each transaction
  commits when its block ends; `durable()` has nothing left to wait for.

The rule for callers is the same on both: nothing is told to the outside before `durable()` returned.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Commit = asyncio.Future[None]  # one SQLite group's COMMIT: resolved once it is on disk, or failed with a StoreError
Params = Sequence[Any]
CHANGES_CHANNEL = "backchannel_changes"  # PostgreSQL: what a run's change is announced on (its id the payload)
STEER_PREFIX = "steer:"  # the payload that announces a message to steer: this prefix, then its session's id


class Row(Protocol):
    """A result row: by column name or position (sqlite3.Row and asyncpg.Record alike)."""

    def __getitem__(self, key: int | str, /) -> Any: ...

    def keys(self) -> Any: ...

    def __iter__(self) -> Iterator[Any]:
        """Its values, in the order of `keys()`."""
        ...


# What a write committed on its own announces (`Db.write`): payloads, or a function of its rows that says which.
Announce = Sequence[str] | Callable[[list[Row]], Sequence[str]]


def columns(row: Row) -> dict[str, Any]:
    """A row's columns by name, read once: a row read field by field by name (sqlite3.Row scans its names for
    each) costs more than this for a wide row such as a run's."""
    return dict(zip(row.keys(), row, strict=True))


class Reads(Protocol):
    """The reads of one transaction (a snapshot's: see `Db.snapshot`)."""

    async def one(self, sql: str, params: Params = ()) -> Row | None: ...

    async def all(self, sql: str, params: Params = ()) -> list[Row]: ...


class Tx(Protocol):
    """The statements of one write transaction; it commits when its `tx()` block ends without an error, and is
    rolled back, every statement of it, when the block raises."""

    async def one(self, sql: str, params: Params = ()) -> Row | None: ...

    async def all(self, sql: str, params: Params = ()) -> list[Row]: ...

    async def run(self, sql: str, params: Params = ()) -> int:
        """Run a statement that returns no rows; how many rows it changed."""
        ...

    async def many(self, sql: str, rows: Sequence[Params]) -> None:
        """Run one statement once per parameter row."""
        ...

    async def announce(self, payload: str) -> None:
        """Tell the other gateways of a shared store, once this transaction commits, that something changed
        (`payload`: a run's id); on SQLite nothing (another process sees the commit itself: `data_version`)."""
        ...


@dataclass(frozen=True)
class Dialect:
    """Where the two engines' SQL differs, the fragment each takes."""

    name: Literal["sqlite", "postgresql"]

    @property
    def row_locks(self) -> bool:
        """Whether other writers run beside this one (PostgreSQL): reads that decide a write lock their rows."""
        return self.name == "postgresql"

    def starts_with(self, column: str, prefix: str) -> str:
        """`column` begins with the literal `prefix` (letters, digits and `:` only), in the form each engine's
        partial indexes are declared with, so that the index serves the query."""
        if not prefix.replace(":", "").replace("-", "").isalnum():
            raise ValueError(f"not a plain prefix: {prefix!r}")
        return f"{column} GLOB '{prefix}*'" if self.name == "sqlite" else f"{column} LIKE '{prefix}%'"

    @property
    def writes_in_with(self) -> bool:
        """Whether one statement may write several tables (PostgreSQL's data-modifying WITH): a write that is one
        round trip, committed on its own (`Db.write`)."""
        return self.name == "postgresql"

    @property
    def skip_locked(self) -> str:
        """Appended to a SELECT whose rows a writer takes: rows another writer holds are passed over."""
        return " FOR UPDATE SKIP LOCKED" if self.row_locks else ""

    @property
    def for_update(self) -> str:
        """Appended to a SELECT whose rows a writer decides on: another writer waits until this one commits."""
        return " FOR UPDATE" if self.row_locks else ""


SQLITE = Dialect("sqlite")
POSTGRESQL = Dialect("postgresql")


class Db(Protocol):
    """One store's database, as the store's operations use it."""

    dialect: Dialect
    name: str  # how errors and logs name it: the file, or the URL without its password
    commits: int  # this process's successful commits (idle detection)

    def tx(self) -> AbstractAsyncContextManager[Tx]:
        """A write transaction (on SQLite inside the loop iteration's group commit)."""
        ...

    async def one(self, sql: str, params: Params = ()) -> Row | None:
        """A read outside any write transaction."""
        ...

    async def all(self, sql: str, params: Params = ()) -> list[Row]: ...

    async def write(self, sql: str, params: Params = (), *, announce: Announce = ()) -> list[Row]:
        """One statement that writes, committed on its own, and its rows; then `announce` told to the other
        gateways (`Tx.announce`; a function of the rows: what they say to announce). PostgreSQL: one round trip,
        no BEGIN or COMMIT; SQLite: a transaction of the loop's group commit."""
        ...

    def snapshot(self) -> AbstractAsyncContextManager[Reads]:
        """A read-only transaction whose reads all see the store as it was when the block began, whatever others
        commit meanwhile (PostgreSQL: REPEATABLE READ; SQLite: one read transaction on a connection of its own)."""
        ...

    async def other_processes(self) -> int | None:
        """How many other processes have this store open now (gateways, commands working in-process); None when
        the store cannot tell (SQLite: a home's gateway is found by its lock, not here)."""
        ...

    async def open(self) -> None:
        """Connect and migrate (SQLite does both when it is made; PostgreSQL here)."""
        ...

    async def aclose(self) -> None: ...

    def group_commits(self, loop: asyncio.AbstractEventLoop) -> None:
        """From now on, serve a long-lived process in `loop` (SQLite: group the commits of each iteration)."""
        ...

    async def writable(self) -> None:
        """Wait, off the event loop, until a write can start without blocking the loop (SQLite's lock)."""
        ...

    async def durable(self, commit: Commit | None = None) -> None:
        """Return once every write made so far (or those of `commit`) is committed; raise the StoreError of a
        commit that failed."""
        ...

    def pending_commit(self) -> Commit | None:
        """The commit the writes made so far will be part of (None: nothing pending)."""
        ...

    def tracking(self) -> AbstractContextManager[list[Commit]]:
        """Collect the commits the writes of the current task (and tasks it starts) go into."""
        ...

    async def all_durable(self, commits: list[Commit]) -> None: ...

    def data_version(self) -> int:
        """A number that changes when another process (another gateway, a CLI) commits."""
        ...

    async def tell(self, channel: str, payload: str) -> None:
        """A notice to the other gateways of a shared store (`payload` under 8000 bytes); on SQLite nothing."""
        ...

    async def hear(self, channel: str, callback: Callable[[str], None]) -> None:
        """`callback(payload)` for each notice the other gateways of a shared store send on `channel`; on SQLite
        none ever comes."""
        ...

    async def live_as(self, owner: str) -> None:
        """From now on, tell the other gateways of a shared store that `owner` (a run queue's claim mark) is alive,
        for as long as this process is (PostgreSQL: a lock its connection holds); on SQLite nothing."""
        ...

    async def gone(self, owners: Collection[str]) -> set[str]:
        """Of `owners`, those known ended (PostgreSQL: their liveness lock is free); on SQLite none."""
        ...
