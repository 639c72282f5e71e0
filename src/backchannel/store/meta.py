"""The store's own settings, kept in the store: `store_meta`, one text value per key (the shared gateway id).

Written against `Db`, in SQL both engines speak; both schemas have the table (SQLite from migration 0016).
"""

from __future__ import annotations

from ..errors import StoreError
from .driver import Db

GATEWAY_ID = "gateway_id"  # the one id of the gateways that share the store


async def meta_get(db: Db, key: str) -> str | None:
    """The value stored under `key`, or None."""
    row = await db.one("SELECT value FROM store_meta WHERE key = ?", (key,))
    return None if row is None else str(row[0])


async def meta_set_default(db: Db, key: str, value: str) -> str:
    """Store `value` under `key` unless a value is there already; the value stored. Gateways racing to set it
    all get the first one's: the losers' inserts wait for its commit, then do nothing and read it."""
    async with db.tx() as tx:
        await tx.run("INSERT INTO store_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING", (key, value))
        row = await tx.one("SELECT value FROM store_meta WHERE key = ?", (key,))
    if row is None:  # the row was there, or this transaction inserted it: only a broken database gets here
        raise StoreError(f"{db.name!r}: store_meta has no {key!r} right after it was set")
    return str(row[0])
