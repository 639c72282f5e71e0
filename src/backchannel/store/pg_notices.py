"""Announcements sent after their commit, coalesced: what a transaction announces (`PgTx.announce`) is told to
the other gateways by one `pg_notify` statement per batch, on a pooled connection, once the transaction has
committed; never inside it.

A notice inside a commit holds PostgreSQL's notification lock through that commit's WAL flush, so commits that
notify are flushed one at a time; sent after, they group again, and no turn waits on a notice of its own. A
notice is a hint: the other gateways read the store when they hear one and look again on their own poll, so
one lost (this process killed between a commit and its batch, the server gone) delays what it announced, it
loses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import Any

import asyncpg

from ..errors import StoreError
from .driver import CHANGES_CHANNEL

log = logging.getLogger("backchannel.store")

NOTIFY_BATCH_SQL = "SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload"
MAX_BATCH = 500  # payloads a statement: one batch stays well under PostgreSQL's 8000-byte notice queue entries


class Notices:
    """The announcements of committed transactions, waiting for the next batch (in order, each once)."""

    def __init__(self, connection: Callable[[], AbstractAsyncContextManager[Any]], *, name: str) -> None:
        self._connection = connection
        self._name = name
        self._pending: dict[str, None] = {}
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self.batches = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._send_batches(), name="backchannel-pg-notices")

    def committed(self, payloads: Iterable[str]) -> None:
        """A transaction committed with these announcements: they go with the next batch."""
        for payload in payloads:
            self._pending[payload] = None
        if self._pending:
            self._idle.clear()
            self._wake.set()

    async def flushed(self) -> None:
        """Until every announcement made so far has been sent (or given up)."""
        await self._idle.wait()

    async def _send_batches(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                batch = list(self._pending)[:MAX_BATCH]
                for payload in batch:
                    del self._pending[payload]
                await self._send(batch)
            self._idle.set()

    async def _send(self, batch: list[str]) -> None:
        try:
            async with self._connection() as conn:
                await conn.execute(NOTIFY_BATCH_SQL, CHANGES_CHANNEL, batch)
            self.batches += 1
        except (StoreError, asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
            # The other gateways find it on their own poll: late, not lost.
            log.warning("%r: %d change notice(s) not sent (%s)", self._name, len(batch), type(exc).__name__)

    async def close(self) -> None:
        """Send what is pending (for a moment at most), then stop."""
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2.0):
                await self.flushed()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
