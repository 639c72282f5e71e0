"""Read-only lookups of a home for shell completion, as fast as a Tab press needs.

What a completer asks the core: the ids of a home's sessions and runs that start with what was typed. They
read state.db opened read-only (`store.peek`): no gateway is built or started, nothing is created, migrated or
written, and a home with no state.db yet has none.
"""

from __future__ import annotations

from pathlib import Path

from ..home import config
from ..store import peek


def session_ids(root: Path, *, prefix: str = "", profile: str | None = None) -> list[str]:
    """Ids of the home's sessions starting with `prefix` (of `profile` when given), most recently active first."""
    return peek.session_ids(config.db_path(root), prefix=prefix, profile=profile)


def room_names(root: Path, *, prefix: str = "") -> list[str]:
    """Names of the home's rooms starting with `prefix`."""
    return peek.room_names(config.db_path(root), prefix=prefix)


def run_ids(root: Path, *, prefix: str = "") -> list[str]:
    """Ids of the home's runs starting with `prefix`, newest first."""
    return peek.run_ids(config.db_path(root), prefix=prefix)
