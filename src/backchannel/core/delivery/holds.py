"""Holds: messages a hold rule keeps for the person (`session_messaging.hold`), approved, denied or expired.

A held run is recorded `held` and its sender told so at once (the outcome `held`). Approving queues it
like any other; denying ends it `denied` (the outcome `refused`); past the profile's `hold_expiry_seconds`
it ends `expired`, and so it does at its sender's deadline (`deadline_passed`: the deadline sweep ends it, and
nobody can release it after). Every end wakes an agent sender that asked to be woken, as a late reply does.
"""

from __future__ import annotations

import asyncio
import logging

from ... import deadlines
from ...errors import Conflict, NotFound, StoreError, UsageError
from ...records import Run
from ...store import runs as runstore
from ...store.driver import Db
from ...store.runs import RunState
from ..queue.commits import commits
from ..queue.queue import RunQueue
from .directory import Directory
from .wakes import Wakes

log = logging.getLogger("backchannel.holds")
SWEEP_SECONDS = 1.0  # how often the gateway looks for held messages past their expiry
DENIED_BY_DEFAULT = "denied by the person"
MAX_REASON_CHARS = 2000  # a deny's reason: its sender reads it (framed into an agent's session), so it is bounded


class Holds:
    """The person's side of every hold: the list, approve, deny, and expiry."""

    def __init__(self, db: Db, queue: RunQueue, directory: Directory, wakes: Wakes) -> None:
        self.db = db
        self.queue = queue
        self.directory = directory
        self.wakes = wakes

    @commits
    async def held(self, *, profile: str | None = None) -> list[Run]:
        """Messages waiting for the person, oldest first (those past their expiry are expired first)."""
        if profile is not None:
            self.directory.check_profile(profile)
        await self._expire()
        return [run for run in await runstore.held(self.db, profile=profile)]

    @commits
    async def approve(self, run_id: str, *, profile: str | None = None) -> Run:
        await self._expire()
        await self._held(run_id, profile)
        run = await self.queue.approve(run_id)
        if run is None:
            await self._expire()  # its deadline passed since the look above: it is over, and `_held` says so
        return run if run is not None else await self._held(run_id, profile)

    @commits
    async def deny(self, run_id: str, *, why: str | None = None, profile: str | None = None) -> Run:
        """Refuse a held message with the person's reason (at most MAX_REASON_CHARS: a longer one is refused
        and changes nothing)."""
        if why is not None and len(why.strip()) > MAX_REASON_CHARS:
            raise UsageError(
                f"the reason has {len(why.strip()):,} characters; a deny's reason has at most {MAX_REASON_CHARS:,}"
                " (its sender reads it): say it shorter",
                code="reason_too_long",
            )
        await self._expire()
        await self._held(run_id, profile)
        run = await self.queue.deny(run_id, why.strip() if why and why.strip() else DENIED_BY_DEFAULT)
        if run is None:
            return await self._held(run_id, profile)
        await self.wakes.of_run(run)  # keyed once per run: the gateway's own wake of it is the same run
        return run

    async def sweep(self) -> None:
        """Background job: expire held messages past their hold expiry, waking their senders."""
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            try:
                if not await self.queue.held_expired():
                    continue  # the common case: nothing to write, no write transaction
                await self.db.writable()
                await self._expire()
                await self.db.durable()
            except StoreError as exc:
                log.warning("held messages not checked for expiry this round: %s", exc.message)

    async def _expire(self) -> None:
        """End the held runs past their hold expiry, and those past their deadline (as the deadline sweep would in a
        moment: nothing the person decides now can release them), waking their senders."""
        for run in await self.queue.expire_held():
            log.info("held run %s expired without the person's approval", run.id)
            await self.wakes.of_run(run)
        for run in await self.queue.expire_late():
            await self.wakes.of_run(run)

    async def _held(self, run_id: str, profile: str | None) -> Run:
        try:
            run = await self.queue.get(run_id)
        except NotFound:
            raise NotFound(f"no held message {run_id!r}", code="run_not_found") from None
        if profile is not None and run.profile != profile:
            raise NotFound(f"no held message {run_id!r} in profile {profile!r}", code="run_not_found")
        if run.state is not RunState.HELD:
            why = f"is {run.state.value}, not held"
            if run.error_code == deadlines.CODE and run.deadline is not None:
                why = f"is over: its deadline ({deadlines.wire(run.deadline)}) passed while it was held, so it expired"
            raise Conflict(f"run {run_id!r} {why}: nothing to approve or deny", code="not_held")
        return run
