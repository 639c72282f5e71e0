"""Profiles' memory texts kept in the store (gateways that share one keep them here: `core.memories`).

A text is one row per (profile, target); a change reads and writes it in one transaction with the row locked, so two
gateways changing the same memory at once both land.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .driver import Db


async def texts(db: Db, profile: str) -> dict[str, str]:
    """The profile's texts the store holds, by target (`memory`, `user`); a target never written is absent."""
    rows = await db.all("SELECT target, content FROM memories WHERE profile = ?", (profile,))
    return {str(r[0]): str(r[1]) for r in rows}


async def change(db: Db, profile: str, target: str, change: Callable[[str | None], str]) -> str:
    """Apply `change` to the stored text (None: none stored yet) and store what it gives, in one transaction; the
    new text. When `change` raises, nothing is written."""
    async with db.tx() as tx:
        row = await tx.one(
            f"SELECT content FROM memories WHERE profile = ? AND target = ?{db.dialect.for_update}", (profile, target)
        )
        text = change(str(row[0]) if row is not None else None)
        await tx.run(
            "INSERT INTO memories (profile, target, content, updated_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (profile, target) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at",
            (profile, target, text, time.time()),
        )
    return text
