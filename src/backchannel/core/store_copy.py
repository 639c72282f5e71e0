"""`backchannel store copy`: this home's store copied, verified, into another empty one.

From the home's own state.db into a PostgreSQL store that gateways can then share (or back again, into a new
state.db file): every table, value for value, each table counted and checksummed on both sides after the copy.
The gateways on the source store are stopped first (a store written during a copy would not be copied whole)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..home import config
from ..home.home_file import STORE_PASSWORD_VAR, STORE_SCHEMES
from ..home.runtime import listening
from ..store import backend
from ..store import copy as storecopy
from ..store.db import Database
from ..store.driver import Db


@dataclass(frozen=True)
class TableCopied:
    """One table as copied: its rows, and the checksum of its rows, the same on both sides."""

    table: str
    rows: int
    checksum: str


@dataclass(frozen=True)
class StoreCopied:
    """What `copy_store` did: from which store into which, table by table."""

    source: str
    target: str
    tables: tuple[TableCopied, ...]

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)


def target_of(root: Path, to: str) -> Db:
    """The store `to` names: a postgresql:// URL (its password in the URL, or in .env as BACKCHANNEL_STORE_PASSWORD),
    or the path of a new state.db file."""
    if to.startswith(STORE_SCHEMES):
        from ..store.pg import PgDatabase

        return PgDatabase(to, password=config.secret_value(root, STORE_PASSWORD_VAR))
    path = Path(to).expanduser()
    if path.exists() and path.is_dir():
        raise UsageError(f"{str(path)!r} is a folder: give the path of a new state.db file, or a postgresql:// URL")
    return Database(path)


async def copy_store(root: Path, to: str) -> StoreCopied:
    """Copy the home's store into the empty store `to`, and verify it."""
    config.require_home(root)
    settings = config.load_gateway_config(root)
    running = listening(root)
    if running is not None:
        raise UsageError(
            f"this home's gateway runs (pid {running.pid}): stop it (and every gateway of its store) first, with"
            " `backchannel gateway stop`, so that nothing is written during the copy"
        )
    source = backend.open_store(root, settings)
    await source.open()
    try:
        target = target_of(root, to)
        if target.name == source.name:
            raise UsageError(f"{to!r} is this home's store itself: give another")
        await target.open()
        try:
            copied = await storecopy.copy(source, target)
        finally:
            await target.aclose()
    finally:
        await source.aclose()
    return StoreCopied(source.name, target.name, tuple(TableCopied(c.table, c.rows, c.checksum) for c in copied))
