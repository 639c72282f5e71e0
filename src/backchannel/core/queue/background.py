"""Background jobs of the store and the queue: cross-process watching, lease renewal, WAL checkpoints,
paused profiles resumed.

Each job outlives a store that cannot be written for a while (a full disk, a lock held elsewhere): the
failure is logged and the job tries again on its next round.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ...errors import StoreError
from ...store import retention
from ...store.db import Database
from ...store.driver import Db
from .pauses import Pauses
from .queue import RunQueue

RESUME_SECONDS = 0.5
DEADLINE_SECONDS = 1.0  # how often the runs past their deadline are looked for, at the least
DEADLINE_PAST = 0.005  # seconds past the earliest deadline its round wakes at (a run ends once its deadline <= now)
LIVENESS_SECONDS = 1.0  # how often a gateway of a shared store looks for the turns of gateways that ended
RETENTION_SECONDS = 3600.0  # how often what passed store.keep_days loses its text
DAY_SECONDS = 86_400.0

CHECKPOINT_SECONDS = 0.5
CHECKPOINT_PAGES = 1000  # SQLite's own default threshold
IDLE_SECONDS = 2.0  # no commit for this long: the WAL is checkpointed with TRUNCATE and its file emptied
log = logging.getLogger("backchannel.store")


async def watch(db: Db, queue: RunQueue, *, seen: int) -> None:
    """Notice runs queued by another process on the same store (a CLI beside the gateway, another gateway)."""
    while True:
        await asyncio.sleep(queue.poll_seconds)
        try:
            version = db.data_version()
            if version != seen:
                seen = version
                await queue.look_again()
        except StoreError as exc:
            log.warning("watching for other processes' runs: %s", exc.message)


async def renew(queue: RunQueue, pauses: Pauses) -> None:
    """Keep this process's leases fresh, requeue runs that another, dead process left running, and take up again
    any session whose queued runs nothing works on (the sessions of paused profiles wait for their config)."""
    while True:
        await asyncio.sleep(queue.lease_seconds / 3)
        try:
            await queue.db.writable()
            await queue.renew()
            await queue.db.durable()
            for session_id in await queue.restart_unworked(paused=pauses.paused):
                log.warning("session %s had queued runs that nothing worked on: taken up again", session_id)
        except StoreError as exc:
            log.warning("leases not renewed this round: %s", exc.message)


async def deadlines(queue: RunQueue) -> None:
    """End the runs whose deadline passed before they started (queued behind a long turn or in a paused profile,
    held for the person and never released), waking their senders: one read a round while none is due, a round
    every DEADLINE_SECONDS, or at the earliest deadline when that comes sooner. A claim ends queued ones too, in its
    own statement."""
    wait = DEADLINE_SECONDS
    while True:
        await asyncio.sleep(wait)
        try:
            due = await queue.next_late()
        except StoreError as exc:
            log.warning("runs past their deadline not ended this round: %s", exc.message)
            due = None
        ahead = None if due is None else due - time.time()
        wait = DEADLINE_SECONDS if ahead is None or ahead <= 0 else min(DEADLINE_SECONDS, ahead + DEADLINE_PAST)


async def liveness(queue: RunQueue) -> None:
    """On a shared store: take up at once the turns another gateway left running when it ended (`requeue_gone`),
    whatever machine it ran on; a gateway alive but silent (paused, cut off) keeps them until their lease ends."""
    while True:
        await asyncio.sleep(LIVENESS_SECONDS)
        try:
            await queue.requeue_gone()
        except StoreError as exc:
            log.warning("looking for the turns of gateways that ended: %s", exc.message)


async def checkpoints(db: Database) -> None:
    """Checkpoint the WAL in a worker thread, so the fsync it needs never stalls the event loop.

    While writes come, a PASSIVE checkpoint whenever the WAL passes CHECKPOINT_PAGES; once no commit came
    for IDLE_SECONDS, one TRUNCATE checkpoint empties the -wal file (after a flood it would otherwise keep
    its largest size for good), and nothing more runs until the next write."""
    version = (db.data_version(), db.commits)
    changed_at = time.monotonic()
    truncated = False
    while True:
        await asyncio.sleep(CHECKPOINT_SECONDS)
        try:
            now_version = (db.data_version(), db.commits)  # another process's commits, and ours
        except StoreError:
            continue
        if now_version != version or db.pending_commit() is not None:
            version, changed_at, truncated = now_version, time.monotonic(), False
        pages = db.wal_pages()
        if pages >= CHECKPOINT_PAGES:
            await asyncio.to_thread(db.checkpoint)
        if not truncated and pages and time.monotonic() - changed_at >= IDLE_SECONDS:
            truncated = await asyncio.to_thread(db.checkpoint, "TRUNCATE")


async def prune(db: Db, keep_days: int) -> None:
    """`store.keep_days`: at start, then every RETENTION_SECONDS, what ended before the cut loses its text."""
    while True:
        now = time.time()
        try:
            pruned = await retention.prune(db, before=now - keep_days * DAY_SECONDS, now=now)
            if pruned:
                log.info("store.keep_days: the text of %d runs older than %d days removed", pruned, keep_days)
        except StoreError as exc:
            log.warning("store.keep_days: nothing removed this round: %s", exc.message)
        await asyncio.sleep(RETENTION_SECONDS)


async def resume_paused(pauses: Pauses, queue: RunQueue) -> None:
    """Profiles paused by a broken config: expire their runs past the TTL, hand them out once the file is valid."""
    while True:
        await asyncio.sleep(RESUME_SECONDS)
        if not pauses.paused:
            continue
        try:
            resumed = pauses.recheck()
            for profile in pauses.paused:
                await queue.expire_due(profile)
        except StoreError as exc:
            log.warning("paused profiles not rechecked this round: %s", exc.message)
            continue
        if resumed:
            await queue.discover()
