"""A whole store copied into another, empty one (SQLite into PostgreSQL, or back), and the copy verified.

Everything is read from one snapshot of the source (`Db.snapshot`): the copy is the store as it was at one moment,
whole and consistent (a run with its messages), whatever is written meanwhile. Every table of the schema both
backends share is copied row by row, in the order its key gives, under the same column names; then each table is
read back on both sides, the source still in the same snapshot, and compared by its count and a checksum of its
rows, so the other store holds what this one held at that moment, value for value. What was written after it is
not in the copy: the runs accepted since are counted, to be said. Ids are kept (a run's id, a message's, an
outbox entry's), and on PostgreSQL each table's own id sequence is moved past the highest one copied.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import StoreError
from .driver import Db, Reads, Row

# Every table but schema_migrations (each store has its own), parents before children; each with the columns
# that order its rows, and the column an id sequence gives (None: none).
TABLES: tuple[tuple[str, str, str | None], ...] = (
    ("store_meta", "key", None),
    ("sessions", "id", None),
    ("runs", "seq", "seq"),
    ("messages", "id", "id"),
    ("run_files", "run_id, ordinal", None),
    ("refusals", "id", "id"),
    ("outbound", "id", "id"),
    ("peer_keys", "name", None),
    ("web_logouts", "sid", None),
    ("a2a_contexts", "caller, profile, context_id", None),
    ("push_configs", "seq", "seq"),
    ("push_outbox", "seq", "seq"),
    ("memories", "profile, target", None),
    ("sender_rates", "sender, minute", None),
    ("idle_watches", "id", None),
    ("rooms", "name", None),
    ("room_members", "room, member", None),
    ("room_rounds", "id", None),
    ("room_lines", "seq", "seq"),
    ("chat_handoffs", "run_id", None),
    ("chat_takers", "profile", None),
    ("questions", "id", None),
)
BATCH = 1000  # rows written per statement batch


@dataclass(frozen=True)
class Copied:
    """One table as copied: its rows and their checksum, the same on both sides."""

    table: str
    rows: int
    checksum: str

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "rows": self.rows, "checksum": self.checksum}


@dataclass(frozen=True)
class Snapshot:
    """A store as copied: each table verified, as of when (epoch seconds: everything committed before it is in
    the copy), and how many runs the source accepted after it (in the source, not in the copy)."""

    tables: list[Copied]
    as_of: float
    runs_after: int


async def empty(db: Db) -> list[str]:
    """The tables of `db` that hold rows (a copy goes only into a store with none)."""
    held = []
    for table, _order, _id in TABLES:
        if await db.one(f"SELECT 1 FROM {table} LIMIT 1") is not None:
            held.append(table)
    return held


async def copy(source: Db, target: Db, *, progress: Callable[[str, int], None] | None = None) -> Snapshot:
    """Copy every table of one snapshot of `source` into the empty `target`, then verify each against that
    snapshot; StoreError when they differ."""
    held = await empty(target)
    if held:
        raise StoreError(
            f"{target.name!r} is not empty ({', '.join(held)} hold rows): a copy goes only into an empty store;"
            " nothing was copied"
        )
    as_of = time.time()  # before the snapshot's first read: what was committed by now is in it
    async with source.snapshot() as snapshot:
        copied_runs: set[str] = set()
        for table, order, id_column in TABLES:
            rows = await snapshot.all(f"SELECT * FROM {table} ORDER BY {order}")
            if table == "runs":
                copied_runs = {row["id"] for row in rows}
            if rows:
                await _insert(target, table, id_column, rows)
            if progress is not None:
                progress(table, len(rows))
        await target.durable()
        tables = await verify(snapshot, target, source_name=source.name)
    runs_after = sum(1 for row in await source.all("SELECT id FROM runs") if row["id"] not in copied_runs)
    return Snapshot(tables, as_of, runs_after)


async def _insert(target: Db, table: str, id_column: str | None, rows: list[Row]) -> None:
    columns = list(rows[0].keys())
    insert = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
    async with target.tx() as tx:
        for start in range(0, len(rows), BATCH):
            await tx.many(insert, [tuple(r[c] for c in columns) for r in rows[start : start + BATCH]])
        if id_column is not None and target.dialect.row_locks:  # PostgreSQL: the next id follows the copied
            await tx.one(
                f"SELECT setval(pg_get_serial_sequence('{table}', '{id_column}'),"
                f" (SELECT MAX({id_column}) FROM {table}))"
            )


async def verify(source: Reads, target: Db, *, source_name: str) -> list[Copied]:
    """Each table's count and checksum on both sides (`source`: the snapshot the copy was read from, of the store
    `source_name`); StoreError naming the first table that differs."""
    done: list[Copied] = []
    for table, order, _id in TABLES:
        mine = await _summary(source, table, order)
        theirs = await _summary(target, table, order)
        if mine != theirs:
            raise StoreError(
                f"the copy of {table} differs: {source_name!r} has {mine[0]} rows (checksum {mine[1][:12]}),"
                f" {target.name!r} {theirs[0]} (checksum {theirs[1][:12]})"
            )
        done.append(Copied(table, mine[0], mine[1]))
    return done


async def _summary(db: Reads, table: str, order: str) -> tuple[int, str]:
    rows = await db.all(f"SELECT * FROM {table} ORDER BY {order}")
    digest = hashlib.sha256()
    for row in rows:
        digest.update(_canonical(row).encode("utf-8", "surrogateescape"))
    return len(rows), digest.hexdigest()


def _canonical(row: Row) -> str:
    """A row's values by column name, each in one spelling whichever engine read it."""
    return "\x1e".join(f"{name}\x1f{_value(row[name])}" for name in sorted(row.keys())) + "\x1d"


def _value(value: object) -> str:
    if value is None:
        return "\x00"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return f"{type(value).__name__}:{value}"
