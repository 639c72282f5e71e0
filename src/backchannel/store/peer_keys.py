"""Keys given to peers: one row per name, with the profiles it reaches, whether it may read, and only its hash.

Kept in state.db rather than a home file: the gateway looks a key up on every request, and a key
created, rotated or revoked by a CLI beside a running gateway is in force at its next request with
no reload; `last_used_at` is written in the same store the runs are.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from ..errors import Conflict, NotFound
from .db import Database

USE_STAMP_SECONDS = 60.0  # last_used_at is written at most this often per key (not on every request)


@dataclass(frozen=True)
class PeerKey:
    """A key as kept: never the key itself."""

    name: str
    profiles: tuple[str, ...]  # patterns over profile names (`*` for all)
    read: bool
    created_at: float
    rotated_at: float | None
    last_used_at: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "profiles": list(self.profiles),
            "read": self.read,
            "created_at": self.created_at,
            "rotated_at": self.rotated_at,
            "last_used_at": self.last_used_at,
        }


def digest(key: str) -> str:
    """A key's hash. The keys are 256 random bits, so a plain SHA-256 is enough (no slow password hash)."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def _row(row: sqlite3.Row) -> PeerKey:
    return PeerKey(
        name=row["name"],
        profiles=tuple(json.loads(row["profiles"])),
        read=bool(row["read"]),
        created_at=row["created_at"],
        rotated_at=row["rotated_at"],
        last_used_at=row["last_used_at"],
    )


def create(db: Database, name: str, key: str, *, profiles: tuple[str, ...], read: bool) -> PeerKey:
    now = time.time()
    with db.tx() as conn:
        if conn.execute("SELECT 1 FROM peer_keys WHERE name = ?", (name,)).fetchone():
            raise Conflict(
                f"a key named {name!r} exists already: `backchannel key rotate {name}` gives it a new value",
                code="key_exists",
            )
        row = conn.execute(
            "INSERT INTO peer_keys (name, key_hash, profiles, read, created_at) VALUES (?, ?, ?, ?, ?) RETURNING *",
            (name, digest(key), json.dumps(list(profiles)), int(read), now),
        ).fetchone()
    return _row(row)


def rotate(db: Database, name: str, key: str) -> PeerKey:
    with db.tx() as conn:
        row = conn.execute(
            "UPDATE peer_keys SET key_hash = ?, rotated_at = ?, last_used_at = NULL WHERE name = ? RETURNING *",
            (digest(key), time.time(), name),
        ).fetchone()
    if row is None:
        raise _unknown(db, name)
    return _row(row)


def revoke(db: Database, name: str) -> PeerKey:
    with db.tx() as conn:
        row = conn.execute("DELETE FROM peer_keys WHERE name = ? RETURNING *", (name,)).fetchone()
    if row is None:
        raise _unknown(db, name)
    return _row(row)


def all_keys(db: Database) -> list[PeerKey]:
    return [_row(r) for r in db.all("SELECT * FROM peer_keys ORDER BY name")]


def get(db: Database, name: str) -> PeerKey:
    row = db.one("SELECT * FROM peer_keys WHERE name = ?", (name,))
    if row is None:
        raise _unknown(db, name)
    return _row(row)


def find(db: Database, key: str) -> PeerKey | None:
    """The peer whose key this is, or None. Every stored hash is compared, in constant time."""
    wanted = digest(key)
    found: sqlite3.Row | None = None
    for row in db.all("SELECT * FROM peer_keys"):
        if hmac.compare_digest(row["key_hash"], wanted):
            found = row
    return _row(found) if found is not None else None


def live(db: Database) -> set[tuple[str, str]]:
    """Every key in force now, as (name, hash)."""
    return {(str(r["name"]), str(r["key_hash"])) for r in db.all("SELECT name, key_hash FROM peer_keys")}


def stamp_use(db: Database, key: PeerKey) -> None:
    """Note that a key was used (at most once a minute per key)."""
    now = time.time()
    if (key.last_used_at or 0) < now - USE_STAMP_SECONDS:
        with db.tx() as conn:
            conn.execute("UPDATE peer_keys SET last_used_at = ? WHERE name = ?", (now, key.name))


def _unknown(db: Database, name: str) -> NotFound:
    known = ", ".join(k.name for k in all_keys(db)) or "none"
    return NotFound(f"no key named {name!r} (keys: {known})", code="key_not_found")
