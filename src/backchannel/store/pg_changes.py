"""Other gateways' commits, heard on PostgreSQL: LISTEN on the changes channel, on a connection of its own.

A writer announces a change with `SELECT pg_notify('backchannel_changes', ?)` inside its transaction (`NOTIFY_SQL`);
PostgreSQL delivers the notice only once that transaction commits, so nothing is heard of before it is durable.
Each notice from another server process than this gateway's own connections moves `version` on. The store stays
the truth: when the listening connection drops, notices sent meanwhile are lost, so `version` moves on again once
it listens anew and the reader looks at the store afresh.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Set
from contextlib import suppress
from typing import Any

import asyncpg

from ..errors import StoreError
from .driver import CHANGES_CHANNEL
from .pg_errors import map_pg_errors
from .pg_liveness import HOLD_SQL, LIVENESS_SPACE

NOTIFY_SQL = f"SELECT pg_notify('{CHANGES_CHANNEL}', ?)"  # a writer's announcement, its payload a run's id or so
CHECK_SECONDS = 15.0  # how often a quiet listening connection is asked whether it is still there
RETRY_FIRST_SECONDS = 0.1  # the first wait before listening anew after the connection dropped; it doubles
RETRY_MAX_SECONDS = 5.0
log = logging.getLogger("backchannel.store")

Connect = Callable[[], Awaitable["asyncpg.Connection[Any]"]]


class ChangeListener:
    """A LISTEN connection outside the pool, kept open (listening anew after a drop) until `close()`.

    `version` counts the notices of other gateways, plus one per reconnection; `own_pids` are the server
    processes of this gateway's own pool, whose notices are not counted (as SQLite's data_version ignores a
    connection's own commits)."""

    def __init__(
        self, connect: Connect, *, name: str, secrets: tuple[str, ...] = (), own_pids: Set[int] = frozenset()
    ) -> None:
        self._connect = connect
        self.name = name
        self._secrets = secrets
        self._own_pids = own_pids
        self.version = 0
        self.reconnects = 0
        self._heard: dict[str, Callable[[str], None]] = {}  # other channels: what each notice of another's is told to
        self._owner: str | None = None  # the owner whose liveness lock this connection holds (`live_as`)
        self._holding = False  # whether the connection holds it now
        self._conn: asyncpg.Connection[Any] | None = None
        self._lost = asyncio.Event()
        self._busy = asyncio.Lock()  # one statement at a time on the listening connection
        self._task: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        """The server process of the listening connection (None while there is none)."""
        conn = self._conn
        return conn.get_server_pid() if conn is not None and not conn.is_closed() else None

    async def start(self) -> None:
        """Listen; a failure here is the caller's (the database cannot be opened), later ones are retried."""
        await self._listen()
        self._task = asyncio.create_task(self._keep_listening(), name="backchannel-pg-listener")

    async def _listen(self) -> None:
        with map_pg_errors(self.name, self._secrets):
            conn = await self._connect()
            lost = asyncio.Event()  # this connection's own: a later one's drop is not this one's
            try:
                conn.add_termination_listener(lambda _conn: lost.set())
                await conn.add_listener(CHANGES_CHANNEL, self._on_notice)
                for channel in self._heard:
                    await conn.add_listener(channel, self._on_heard)
                if self._owner is not None:
                    await self._hold(conn, self._owner)
            except BaseException:
                conn.terminate()
                raise
        self._conn, self._lost = conn, lost

    def _on_notice(self, _conn: object, pid: int, _channel: str, _payload: object) -> None:
        if pid not in self._own_pids:
            self.version += 1

    async def hear(self, channel: str, callback: Callable[[str], None]) -> None:
        """From now on, `callback(payload)` for each notice another gateway sends on `channel` (also after the
        listening connection is made anew)."""
        self._heard[channel] = callback
        conn = self._conn
        if conn is not None and not conn.is_closed():
            async with self._busy:
                with map_pg_errors(self.name, self._secrets):
                    await conn.add_listener(channel, self._on_heard)

    async def live_as(self, owner: str) -> None:
        """From now on hold `owner`'s liveness lock (`pg_liveness`) on the listening connection, and again on each
        connection made after a drop: the other gateways see this process alive while it holds it."""
        self._owner = owner
        conn = self._conn
        if conn is not None and not conn.is_closed():
            async with self._busy:
                with map_pg_errors(self.name, self._secrets):
                    await self._hold(conn, owner)

    async def _hold(self, conn: asyncpg.Connection[Any], owner: str) -> None:
        self._holding = bool(await conn.fetchval(HOLD_SQL, LIVENESS_SPACE, owner))
        if not self._holding:  # an earlier connection of ours, not yet ended on the server: asked again later
            log.warning("%r: the liveness lock of %s is still held by an earlier connection", self.name, owner)

    def _on_heard(self, _conn: object, pid: int, channel: str, payload: object) -> None:
        callback = self._heard.get(channel)
        if callback is not None and pid not in self._own_pids:
            callback(str(payload))

    async def _keep_listening(self) -> None:
        while True:
            with suppress(TimeoutError):
                async with asyncio.timeout(CHECK_SECONDS):
                    await self._lost.wait()
            if not self._lost.is_set() and await self._alive():
                await self._hold_again()
                continue
            await self._drop()
            await self._listen_again()

    async def _alive(self) -> bool:
        """Whether the quiet connection still answers (a peer that vanished without closing is noticed here)."""
        try:
            async with asyncio.timeout(CHECK_SECONDS):
                await self._round_trip()
        except (StoreError, TimeoutError) as exc:
            log.warning("listening for other gateways' changes: %s", getattr(exc, "message", "no answer in time"))
            return False
        return True

    async def _hold_again(self) -> None:
        """Take the liveness lock an earlier connection still held when this one was made."""
        conn, owner = self._conn, self._owner
        if owner is None or self._holding or conn is None or conn.is_closed():
            return
        async with self._busy:
            with suppress(StoreError), map_pg_errors(self.name, self._secrets):
                await self._hold(conn, owner)

    async def caught_up(self) -> None:
        """Return once every notice committed before this call is counted in `version`: the server sends the
        notices it holds for this connection before it answers a statement on it. While the connection is
        being replaced, at once (`version` moves on when it listens again)."""
        if self._conn is not None and not self._conn.is_closed():
            await self._round_trip()

    async def _round_trip(self) -> None:
        async with self._busy:
            conn = self._conn
            if conn is None or conn.is_closed():
                raise StoreError(f"{self.name!r}: the listening connection is closed")
            with map_pg_errors(self.name, self._secrets):
                await conn.execute("SELECT 1")
        # the notices read before the answer were scheduled (call_soon) before this task was woken: counted

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        self._holding = False
        if conn is not None and not conn.is_closed():
            conn.terminate()

    async def _listen_again(self) -> None:
        wait = RETRY_FIRST_SECONDS
        while True:
            await asyncio.sleep(wait)
            try:
                await self._listen()
            except Exception as exc:  # a StoreError, mapped with its password scrubbed
                log.warning("cannot listen for other gateways' changes, trying again in %.1fs: %s", wait, exc)
                wait = min(wait * 2, RETRY_MAX_SECONDS)
                continue
            self.reconnects += 1
            self.version += 1  # notices may have been missed while no connection listened
            log.info("listening for other gateways' changes again on %r", self.name)
            return

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            try:
                async with asyncio.timeout(CHECK_SECONDS):
                    await conn.close()
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
                conn.terminate()
