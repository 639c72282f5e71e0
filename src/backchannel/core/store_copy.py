"""`backchannel store copy`: this home's store copied, verified, into another empty one.

From the home's own state.db into a PostgreSQL store that gateways can then share (or back again, into a new
state.db file): every table, value for value, from one snapshot of the store, each table counted and checksummed
on both sides after the copy. A copy is a moment of the store: what is written after it is not in it. So it is
refused while anything else has the store open (this home's gateway; on a shared store any gateway, or a command
working in-process), unless the person asks for the snapshot anyway (`while_running`): then the copy says as of
when it is, and how many runs were accepted after it."""

from __future__ import annotations

import re
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
    """What `copy_store` did: from which store into which, table by table, as of when (epoch seconds), and how
    many runs the source accepted after that moment (not in the copy)."""

    source: str
    target: str
    tables: tuple[TableCopied, ...]
    as_of: float
    runs_after: int

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)


def target_of(root: Path, to: str) -> Db:
    """The store `to` names: a postgresql:// URL (its password in the URL, or in .env as BACKCHANNEL_STORE_PASSWORD),
    or the path of a new state.db file."""
    if to.startswith(STORE_SCHEMES):
        from ..store.pg import PgDatabase

        return PgDatabase(to, password=config.secret_value(root, STORE_PASSWORD_VAR))
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", to)
    if scheme is not None:
        raise UsageError(
            f"{scheme.group(1)}:// is not a store Backchannel can use: give a postgresql:// URL or the path of a new"
            " state.db file"
        )
    path = Path(to).expanduser()
    if path.exists() and path.is_dir():
        raise UsageError(f"{str(path)!r} is a folder: give the path of a new state.db file, or a postgresql:// URL")
    return Database(path)


async def copy_store(root: Path, to: str, *, while_running: bool = False) -> StoreCopied:
    """Copy one snapshot of the home's store into the empty store `to`, and verify it. Refused while anything else
    has the store open, unless `while_running`."""
    config.require_home(root)
    settings = config.load_gateway_config(root)
    source = backend.open_store(root, settings)
    await source.open()
    try:
        if not while_running:
            _refuse_if_in_use(root, source.name, await source.other_processes())
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
    tables = tuple(TableCopied(c.table, c.rows, c.checksum) for c in copied.tables)
    return StoreCopied(source.name, target.name, tables, copied.as_of, copied.runs_after)


def _refuse_if_in_use(root: Path, store: str, others: int | None) -> None:
    """UsageError when this home's gateway runs, or (a shared store) `others` processes have the store open."""
    running = listening(root)
    users = []
    if running is not None:
        users.append(f"this home's gateway runs (pid {running.pid})")
        others = others - 1 if others else others  # on a shared store it is one of them
    if others:
        users.append(
            f"{others} other process{'es have' if others > 1 else ' has'} the store {store!r} open (a gateway, or a"
            " command working without one)"
        )
    if users:
        raise UsageError(
            f"{' and '.join(users)}: what is written during the copy would not be in it. Stop every gateway of the"
            " store first (`backchannel gateway stop` on each host), or copy it as it is at one moment with"
            " --while-running (what is written after that moment is not in the copy)"
        )
