"""Which store a home's gateway uses: its own state.db (SQLite, the default), or a PostgreSQL database that several
gateways share (`store.url` in the home's config.yaml, or BACKCHANNEL_STORE_URL, which wins; the password in the
home's .env as BACKCHANNEL_STORE_PASSWORD, never in a config file).

`open_store` is how everything opens a home's store (the gateway, every command that works in-process, a copy),
so a damaged state.db is refused here, for all of them alike, before anything is written into it."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConfigError
from ..home import config
from ..home.home_file import STORE_PASSWORD_VAR, STORE_SCHEMES, GatewayConfig
from . import integrity
from .db import Database
from .driver import Db

STORE_URL_VAR = "BACKCHANNEL_STORE_URL"


def store_url(settings: GatewayConfig) -> str:
    """The shared store's URL this gateway is told to use; "" for the home's own state.db."""
    url = os.environ.get(STORE_URL_VAR, "").strip() or settings.store.url
    if url and not url.startswith(STORE_SCHEMES):
        raise ConfigError(f"{STORE_URL_VAR} must be a postgresql:// URL (or unset for the home's state.db)")
    return url


def is_shared(settings: GatewayConfig) -> bool:
    """Whether the gateways of this home share a PostgreSQL store (rather than one state.db of their own)."""
    return bool(store_url(settings))


def open_store(root: Path, settings: GatewayConfig) -> Db:
    """The store of the home at `root`: made, not yet connected (`await db.open()`; SQLite opens the file here).

    A damaged state.db is refused first (StoreError `store_damaged`, with the commands that recover it: see
    `store.integrity`), so that nothing writes into it."""
    url = store_url(settings)
    if not url:
        path = config.db_path(root)
        integrity.require_intact(path)
        return Database(path, durability=settings.durability)
    try:
        from .pg import PgDatabase  # asyncpg loads only for a home that uses it
    except ImportError as exc:
        raise ConfigError(
            f"the store at {url.split('@')[-1]!r} is PostgreSQL, whose driver is not installed here: "
            "install the postgres extra (pip install '<Backchannel's folder or wheel>[postgres]')"
        ) from exc
    return PgDatabase(url, password=config.secret_value(root, STORE_PASSWORD_VAR), pool_size=settings.store.pool_size)
