"""Background jobs of the store and the queue: cross-process watching, lease renewal, WAL checkpoints,
paused profiles resumed."""

from __future__ import annotations

import asyncio

from ..store.db import Database
from .pauses import Pauses
from .queue import RunQueue

RESUME_SECONDS = 0.5

CHECKPOINT_SECONDS = 0.5
CHECKPOINT_PAGES = 1000  # SQLite's own default threshold


async def watch(db: Database, queue: RunQueue, *, seen: int) -> None:
    """Notice runs queued by another process on the same home (a CLI beside the gateway)."""
    while True:
        await asyncio.sleep(queue.poll_seconds)
        version = db.data_version()
        if version != seen:
            seen = version
            queue.discover()


async def renew(queue: RunQueue) -> None:
    """Keep this process's leases fresh, and requeue runs that another, dead process left running."""
    while True:
        await asyncio.sleep(queue.lease_seconds / 3)
        queue.renew()


async def checkpoints(db: Database) -> None:
    """Checkpoint the WAL in a worker thread, so the fsync it needs never stalls the event loop."""
    while True:
        await asyncio.sleep(CHECKPOINT_SECONDS)
        if db.wal_pages() >= CHECKPOINT_PAGES:
            await asyncio.to_thread(db.checkpoint)


async def resume_paused(pauses: Pauses, queue: RunQueue) -> None:
    """Profiles paused by a broken config: expire their runs past the TTL, hand them out once the file is valid."""
    while True:
        await asyncio.sleep(RESUME_SECONDS)
        if not pauses.paused:
            continue
        resumed = pauses.recheck()
        for profile in pauses.paused:
            queue.expire_due(profile)
        if resumed:
            queue.discover()
