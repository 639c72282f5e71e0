"""Idle notices: `notify_when_idle(session_id)` leaves one notice for the asking agent, delivered into its session
(a wake-up, like a late reply) when the target session next has nothing queued or running.

Asked like a send (the asker's allow list, the target's accept list: a target it may not message it may not
watch either), kept in the store until delivered (`store.idle`), and looked at by a job of the gateway.
"""

from __future__ import annotations

import asyncio
import logging

from ... import keys
from ...errors import StoreError
from ...store import idle as idlestore
from ...store.driver import Db
from .wakes import Wakes

log = logging.getLogger("backchannel.idle")
LOOK_SECONDS = 0.5  # how often the notices owed are looked at


def notice_text(watch: idlestore.IdleWatch) -> str:
    """What the asking agent reads: our own heading line, then the word."""
    return f"[Notice: {watch.target} has nothing queued or running now (you asked with notify_when_idle)]\nidle"


class IdleNotices:
    """The notices owed, and the job that delivers each once its session is idle."""

    def __init__(self, db: Db, wakes: Wakes) -> None:
        self.db = db
        self.wakes = wakes

    async def run(self) -> None:
        """Background job: deliver every notice whose session is idle now (a notice's key keeps it to one)."""
        while True:
            await asyncio.sleep(LOOK_SECONDS)
            try:
                await self.deliver_due()
            except StoreError as exc:
                log.warning("idle notices not looked at this round: %s", exc.message)

    async def deliver_due(self) -> None:
        for watch in await idlestore.pending(self.db):
            if await idlestore.busy(self.db, watch.session_id):
                continue
            await self.db.writable()
            woken = await self.wakes.deliver(
                session_id=watch.sender_session,
                text=notice_text(watch),
                sender=watch.target,
                key=f"{keys.WAKE}idle:{watch.id}",
                hops=watch.hops + 1,
                exchange=watch.origin,
            )
            if woken is not None:
                await idlestore.noticed(self.db, watch.id)
            await self.db.durable()
