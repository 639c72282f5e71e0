"""Keys given to peers: one row per name, with the profiles it reaches, whether it may read, and only its hash.
An agent's key (`acts_as` a profile) is a row here too: it acts only as that profile's sessions.

Kept in state.db rather than a home file: the gateway looks a key up on every request, and a key
created, rotated or revoked by a CLI beside a running gateway is in force at its next request with
no reload; `last_used_at` is written in the same store the runs are.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping

from ..errors import Conflict, NotFound
from ..records import PeerKey as PeerKey  # what the core and the doctor name it by
from .driver import Db, Row

USE_STAMP_SECONDS = 60.0  # last_used_at is written at most this often per key (not on every request)


def digest(key: str) -> str:
    """A key's hash. The keys are 256 random bits, so a plain SHA-256 is enough (no slow password hash)."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def _row(row: Row) -> PeerKey:
    return PeerKey(
        name=row["name"],
        profiles=tuple(json.loads(row["profiles"])),
        read=bool(row["read"]),
        created_at=row["created_at"],
        rotated_at=row["rotated_at"],
        last_used_at=row["last_used_at"],
        metrics=bool(row["metrics"]),
        acts_as=row["acts_as"],
        hermes_home=row["hermes_home"],
    )


async def create(
    db: Db,
    name: str,
    key: str,
    *,
    profiles: tuple[str, ...],
    read: bool,
    metrics: bool = False,
    acts_as: str | None = None,
    hermes_home: str | None = None,
) -> PeerKey:
    now = time.time()
    async with db.tx() as tx:
        if await tx.one("SELECT 1 FROM peer_keys WHERE name = ?", (name,)):
            raise Conflict(
                f"a key named {name!r} exists already: `backchannel key rotate {name}` gives it a new value",
                code="key_exists",
            )
        row = await tx.one(
            "INSERT INTO peer_keys (name, key_hash, profiles, read, created_at, metrics, acts_as, hermes_home)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
            (name, digest(key), json.dumps(list(profiles)), int(read), now, int(metrics), acts_as, hermes_home),
        )
    assert row is not None  # INSERT … RETURNING gives the row it wrote
    return _row(row)


async def rotate(db: Db, name: str, key: str) -> PeerKey:
    async with db.tx() as tx:
        row = await tx.one(
            "UPDATE peer_keys SET key_hash = ?, rotated_at = ?, last_used_at = NULL WHERE name = ? RETURNING *",
            (digest(key), time.time(), name),
        )
    if row is None:
        raise await _unknown(db, name)
    return _row(row)


async def place(db: Db, name: str, hermes_home: str) -> PeerKey:
    """Note the Hermes home whose .env holds the key now."""
    async with db.tx() as tx:
        row = await tx.one("UPDATE peer_keys SET hermes_home = ? WHERE name = ? RETURNING *", (hermes_home, name))
    if row is None:
        raise await _unknown(db, name)
    return _row(row)


async def revoke(db: Db, name: str) -> PeerKey:
    async with db.tx() as tx:
        row = await tx.one("DELETE FROM peer_keys WHERE name = ? RETURNING *", (name,))
    if row is None:
        raise await _unknown(db, name)
    return _row(row)


async def all_keys(db: Db) -> list[PeerKey]:
    return [_row(r) for r in await db.all("SELECT * FROM peer_keys ORDER BY name")]


async def get(db: Db, name: str) -> PeerKey:
    row = await db.one("SELECT * FROM peer_keys WHERE name = ?", (name,))
    if row is None:
        raise await _unknown(db, name)
    return _row(row)


async def by_hash(db: Db) -> dict[str, PeerKey]:
    """Every key in force, by its hash."""
    return {str(row["key_hash"]): _row(row) for row in await db.all("SELECT * FROM peer_keys")}


def match(keys: Mapping[str, PeerKey], key: str) -> PeerKey | None:
    """The peer among `keys` (by hash, as `by_hash` reads them) whose key this is, or None. Every hash is
    compared, in constant time."""
    wanted = digest(key)
    found: PeerKey | None = None
    for stored, peer in keys.items():
        if hmac.compare_digest(stored, wanted):
            found = peer
    return found


async def live(db: Db) -> set[tuple[str, str]]:
    """Every key in force now, as (name, hash)."""
    return {(str(r["name"]), str(r["key_hash"])) for r in await db.all("SELECT name, key_hash FROM peer_keys")}


async def stamp_use(db: Db, key: PeerKey) -> None:
    """Note that a key was used (at most once a minute per key)."""
    now = time.time()
    if (key.last_used_at or 0) < now - USE_STAMP_SECONDS:
        async with db.tx() as tx:
            await tx.run("UPDATE peer_keys SET last_used_at = ? WHERE name = ?", (now, key.name))


async def _unknown(db: Db, name: str) -> NotFound:
    known = ", ".join(k.name for k in await all_keys(db)) or "none"
    return NotFound(f"no key named {name!r} (keys: {known})", code="key_not_found")
