"""The web view's logged-out sessions: each session id with the time its cookie would have expired anyway."""

from __future__ import annotations

from .db import Database


def add(db: Database, sid: str, until: float, *, now: float) -> None:
    """Record `sid` as logged out until `until`, dropping the entries whose cookies have expired."""
    with db.tx() as conn:
        conn.execute("DELETE FROM web_logouts WHERE until <= ?", (now,))
        conn.execute("INSERT OR REPLACE INTO web_logouts (sid, until) VALUES (?, ?)", (sid, until))


def unexpired(db: Database, *, now: float) -> dict[str, float]:
    """The logged-out session ids whose cookies could still be presented, with their expiry."""
    return {str(r[0]): float(r[1]) for r in db.all("SELECT sid, until FROM web_logouts WHERE until > ?", (now,))}
