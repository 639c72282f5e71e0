"""The run queue: durable runs in state.db, and in this process which sessions have work, who waits, what runs.

It knows nothing of turns or messaging. The delivery service puts runs in (`submit`) and waits for
them; the workers take sessions with work (`next_ready`), claim their runs and finish them. Several
processes on one home coordinate through state.db: a run is claimed by one guarded UPDATE, a
session never has two running runs, and runs left `running` by a dead process are requeued.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from ... import procs
from ...agent.loop import TurnProgress
from ...errors import Conflict, GatewayDraining, StoreError
from ...events import Asked
from ...home.config import GatewayConfig
from ...messages import Message
from ...outcome import Consumed
from ...records import Run
from ...store import questions as questionstore
from ...store import runs as runstore
from ...store.driver import CHANGES_CHANNEL, Commit, Db
from ...store.runs import Admit, NewRun, RunState
from .events import EventHub, ended
from .slots import FairSlots
from .spans import RunSpans
from .steers import SteerHints

log = logging.getLogger("backchannel.queue")
HOST = socket.gethostname().replace(":", "-")  # the machine a run's owner runs on (an owner is `host:pid:token`)

OnState = Callable[[Run, RunState], None]  # a run and the state it just entered (reported in order)
SAVE_RETRY_FIRST = 0.1  # seconds before a run's end that could not be saved (a full disk) is tried again
SAVE_RETRY_MAX = 2.0


@dataclass
class Turn:
    """A turn running in this process: the task it runs in (cancelled to stop it) and what it produced so far
    (which says whether a stop was asked: the engine then stops the far side's turn too)."""

    task: asyncio.Task[None]
    progress: TurnProgress
    late: bool = False  # stopped at its run's deadline (not on request)

    @property
    def stop_requested(self) -> bool:
        return self.progress.stop_requested


@dataclass
class _Channel:
    """Items for one consumer task, in order; `get` waits for the next one."""

    items: list[tuple[str, Run | None]] = field(default_factory=list)
    waiter: asyncio.Future[None] | None = None

    def put(self, item: tuple[str, Run | None]) -> None:
        self.items.append(item)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def get(self) -> tuple[str, Run | None]:
        while not self.items:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
        return self.items.pop(0)


class RunQueue:
    """Durable runs of one home and this process's view of them: sessions with work, waiters, leases, turns."""

    def __init__(
        self,
        db: Db,
        settings: GatewayConfig,
        *,
        hub: EventHub,
        on_state: OnState | None = None,
        lease_seconds: float = 30.0,
        poll_seconds: float = 0.25,
        scope: set[str] | None = None,
        runs_turns: bool = True,
        clock: Callable[[], float] = time.time,
        saved: Callable[[float], None] | None = None,
    ) -> None:
        """`scope` limits the sessions whose queued runs this process takes up from the store (None: all), e.g. for
        a CLI's one-off turn (what this process queues itself it works). Without `runs_turns`, it claims nothing:
        on a shared store, the other gateways run the turns of what it queues. `clock`: when a run is recorded (its
        dedup window and expiry count from it); a test gives its own."""
        self.db = db
        self.clock = clock
        self.settings = settings
        self.hub = hub
        self.owner = f"{HOST}:{os.getpid()}:{secrets.token_hex(4)}"
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self.scope = scope
        self.runs_turns = runs_turns
        self._saved = saved or (lambda seconds: None)  # how long a run's end took to commit (the metrics)
        self.steers = SteerHints()
        self.spans = RunSpans()  # each run's span while its turn runs here
        self._on_state = on_state or (lambda run, state: None)
        self._slots = FairSlots(settings.max_concurrent_turns, settings.turns_per_profile)
        self._profiles: dict[str, str] = {}  # session id -> its profile, for the slots
        self._ready = _Channel()  # sessions handed to the workers, with a run already claimed for them or None
        self._handed: set[str] = set()  # sessions handed out and not yet released by the workers
        self._again: set[str] = set()  # handed-out sessions given a run since their worker last looked: handed anew
        self._claimed_first: dict[str, Run] = {}  # runs claimed at their record while their session was handed out
        self._behind: dict[str, bool] = {}  # session -> whether a run was queued in it when its last turn ended
        self._ended: asyncio.Queue[Run] = asyncio.Queue()  # ended runs whose sender asked to be woken
        self._done: dict[str, asyncio.Future[Run]] = {}  # run id -> its end, for waiters in this process
        self._told: set[str] = set()  # runs waited on here that another gateway announced a change of, to read
        self._reading_told: asyncio.Task[None] | None = None
        self._owned: set[str] = set()  # runs claimed here and not finished: their leases are renewed
        self._turns: dict[str, Turn] = {}
        self._recorded: dict[str, Commit] = {}  # runs recorded claimed, handed out before their commit
        self._saving: set[str] = set()  # runs whose end is computed and being saved (retried on a full disk)
        self.accepting = False  # sessions are handed out only between open() and drain()
        self.draining = False

    # --- lifecycle -----------------------------------------------------------------------------

    async def open(self) -> None:
        """Start serving in the running loop: reclaim what a crash left running, hand out queued sessions."""
        self.db.group_commits(asyncio.get_running_loop())
        await self.db.live_as(self.owner)  # before any claim: the other gateways of a shared store see it alive
        await self.db.hear(CHANGES_CHANNEL, self._heard_change)  # other gateways' changes (a shared store)
        for run in await self.reclaim(is_dead=owner_is_dead):
            log.info("run %s reclaimed after an interrupted turn (attempt %d)", run.id, run.attempts)
        self.accepting = True
        for run in await runstore.pending_wakes(self.db):
            self._ended.put_nowait(run)
        await self.discover()

    def drain(self) -> None:
        """Take no new work: submits are refused (503) and no session is handed out."""
        self.accepting = False
        self.draining = True

    async def close(self) -> None:
        """Put back in the queue what this process still holds (turns cut by a stop run again later).

        A run whose end could not be saved before the stop (a full disk) is among them: it was never
        reported ended, and runs again after the restart."""
        self._saving.clear()
        self._recorded.clear()
        if self._reading_told is not None:
            self._reading_told.cancel()
        for run in await self.reclaim(is_dead=lambda owner: owner == self.owner, attempts_bonus=1):
            if run.state.terminal:  # past gateway.max_attempts: it ends here
                log.warning("run %s %s at shutdown: %s", run.id, run.state.value, run.error or "no detail")
            else:
                log.info(
                    "run %s requeued at shutdown (session %s): its turn was cut and runs again on the next start",
                    run.id,
                    run.session_id,
                )
        await runstore.give_up(self.db, self.owner)  # this gateway's sessions: the others take them at once

    # --- putting runs in -----------------------------------------------------------------------

    async def submit(self, new: NewRun, *, admit: Admit | None = None, capped: bool = True) -> tuple[Run, bool]:
        """Record a run (or find the one filed under the same key) and queue it; returns (run, created).

        A new run is refused (LimitReached) past `max_queued_per_session` (unless not `capped`: a wake-up,
        at most one per message its session sent), or when `admit` raises."""
        if self.draining:
            raise GatewayDraining("the gateway is shutting down and takes no new messages; try again shortly")
        # An idle session's run is recorded already claimed, when a turn slot is free here.
        claim = (
            self.accepting
            and self.runs_turns
            and new.session_id not in self._handed
            and self._slots.free_for(new.profile)
        )
        run, created = await runstore.record(
            self.db,
            new,
            claim_for=self.owner if claim else None,
            now=self.clock(),
            lease_seconds=self.lease_seconds,
            ttl_seconds=self.settings.run_ttl_seconds or None,
            max_queued=self.settings.max_queued_per_session if capped else None,
            admit=admit,
        )
        self._profiles[run.session_id] = run.profile
        if created:
            if run.state is RunState.RUNNING:  # accepted and started at once: both transitions are reported
                self._on_state(run, RunState.QUEUED)
                self._owned.add(run.id)
                commit = self.db.pending_commit()
                if commit is not None:
                    self._recorded[run.id] = commit  # its turn starts only once the run is on disk
                self._on_state(run, run.state)
                self._hand(run.session_id, run)
            else:
                self._on_state(run, run.state)
                if run.state is RunState.QUEUED:
                    self._hand(run.session_id, None)
        elif run.state is RunState.QUEUED:  # asked again while it waits: worked here too
            self.take_up(run.session_id)
        return run, created

    def take_up(self, session_id: str) -> None:
        """Work the session's queued runs here too, whatever this process's `scope` (a CLI's own gateway works the
        sessions of the runs its command sends or follows); a session handed out already is left as it is."""
        self._hand(session_id, None)

    async def discover(self) -> None:
        """Hand out the sessions with queued runs found in the store (within `scope`)."""
        for session_id in await runstore.sessions_with_queued(self.db):
            if self.scope is None or session_id in self.scope:
                self._hand(session_id, None)

    async def restart_unworked(self, *, paused: Collection[str] = ()) -> list[str]:
        """Hand out anew every session (within `scope`) that has queued runs and nothing working on it: none
        running anywhere, none handed out here. Whatever left it so (a notice missed, a claim that lost a race,
        a bug), its runs are taken up again. The sessions of `paused` profiles wait for their config instead.
        Returns the sessions handed out."""
        if not self.accepting or not self.runs_turns:
            return []
        restarted = []
        for session_id, profile in await runstore.sessions_unworked(self.db):
            if session_id in self._handed or profile in paused:
                continue
            if self.scope is None or session_id in self.scope:
                self._hand(session_id, None)
                restarted.append(session_id)
        return restarted

    async def look_again(self) -> None:
        """Another process committed (a CLI beside this gateway, another gateway on a shared store): hand out the
        sessions it queued runs in, and answer the waits here on runs that ended there."""
        await self.discover()
        waited = [run_id for run_id, done in self._done.items() if not done.done()]
        for run in await runstore.ended_among(self.db, waited):
            self._ended_elsewhere(run)

    def _ended_elsewhere(self, run: Run) -> None:
        if run.id in self._owned:
            return  # ended here: told by its own finish
        self.hub.publish(ended(run))
        done = self._done.pop(run.id, None)
        if done is not None and not done.done():
            done.set_result(run)

    def _heard_change(self, payload: str) -> None:
        """Another gateway's announcement of a change (a shared store): a message to steer marks its session; a
        run waited on here is read at once, so its waiters hear of its end when it is told, not at the next poll."""
        self.steers.heard(payload)
        done = self._done.get(payload)
        if done is None or done.done():
            return
        self._told.add(payload)
        if self._reading_told is None or self._reading_told.done():
            self._reading_told = asyncio.create_task(self._read_told(), name="backchannel-told-runs")

    async def _read_told(self) -> None:
        while self._told:
            run_ids, self._told = sorted(self._told), set()
            try:
                for run in await runstore.ended_among(self.db, run_ids):
                    self._ended_elsewhere(run)
            except StoreError as exc:  # the poll (`look_again`) answers them
                log.warning("reading runs another gateway changed: %s", exc.message)
                return

    def _hand(self, session_id: str, first: Run | None) -> None:
        if not self.accepting or not self.runs_turns:
            return
        if session_id in self._handed:
            self._again.add(session_id)  # its worker may have looked already: it is handed out again on release
            if first is not None:  # claimed at its record while another send handed the session out: kept for it
                self._claimed_first[session_id] = first
            return
        self._handed.add(session_id)
        self._behind.pop(session_id, None)
        self._ready.put((session_id, first))

    # --- taking runs out (the workers) ---------------------------------------------------------

    async def next_ready(self) -> tuple[str, Run | None]:
        """The next session with work, and the run already claimed for it (or None: claim with `claim`)."""
        return await self._ready.get()

    async def claim(self, session_id: str) -> Run | None:
        """The session's next run, claimed by this process once the claim is on disk; None when it has none
        (or one runs elsewhere); a run queued while it looked hands the session out again on `release`.
        A claim that cannot be saved raises StoreError; the run stays queued."""
        behind = self._behind.pop(session_id, None)  # read with the end of its last turn, when it had one
        if behind is None:
            self._again.discard(session_id)  # what is queued from here on, this claim or the next hand-out sees
            behind = await runstore.has_queued(self.db, session_id)
        if not behind:
            return None
        await self.db.writable()
        run, expired = await runstore.claim_next(
            self.db, session_id, owner=self.owner, lease_seconds=self.lease_seconds
        )
        await self.db.durable()
        for gone in expired:
            self._ended_run(gone)
        if run is not None:
            self._owned.add(run.id)
            self._on_state(run, run.state)
        return run

    async def put_back(self, run: Run) -> None:
        """A claimed run whose turn the store cut (nothing of it was answered): back in the queue, to run again. When
        the store cannot take even that, its lease is no longer renewed: once it runs out, the run is requeued."""
        self.spans.cut(run.id, "the store cut the turn: it runs again", code=StoreError.code)
        try:
            await self.unclaim(run)
        except StoreError as exc:
            log.warning("run %s is requeued once its lease runs out: %s", run.id, exc.message)

    async def unclaim(self, run: Run) -> None:
        """Put a claimed run back in the queue before its turn began (its profile is paused)."""
        self._owned.discard(run.id)
        back = await runstore.unclaim(self.db, run, owner=self.owner)
        if back is not None:
            self.steers.add(back.session_id)  # what its turn had taken in is given to its next attempt
            self._on_state(back, back.state)

    # --- holds (a person's approval) ------------------------------------------------------------

    async def approve(self, run_id: str) -> Run | None:
        """A held run queued; None when it was not held (any more)."""
        run = await runstore.approve(self.db, run_id, ttl_seconds=self.settings.run_ttl_seconds or None)
        if run is not None:
            self._on_state(run, run.state)
            self._hand(run.session_id, None)
        return run

    async def deny(self, run_id: str, why: str) -> Run | None:
        """A held run refused; its end is told like any other (waiters, events, the sender's wake-up)."""
        run = await runstore.deny(self.db, run_id, why=why)
        if run is not None:
            self._ended_run(run)
        return run

    async def held_expired(self) -> bool:
        """Whether a held run is past its hold expiry (a read: no write transaction)."""
        return await runstore.has_held_expired(self.db, time.time())

    async def expire_held(self) -> list[Run]:
        expired = await runstore.expire_held(self.db)
        for run in expired:
            self._ended_run(run)
        return expired

    async def expire_due(self, profile: str) -> None:
        """Expire the profile's queued runs past their TTL, waking their senders (a paused queue claims none)."""
        for gone in await runstore.expire_due(self.db, profile):
            self._ended_run(gone)

    async def expire_late(self) -> list[Run]:
        """End the runs past their deadline that never started, queued or held for the person (`expired`,
        `deadline_passed`), waking their senders: a read of the earliest deadline first, so a store with none due
        writes nothing."""
        due = await runstore.next_deadline(self.db)
        if due is None or due > time.time():
            return []
        return await self._end_late()

    async def next_late(self) -> float | None:
        """A round of the deadline sweep: `expire_late`, then the earliest deadline still ahead (None: none), when
        the next round is due at the latest. One read a round while nothing is due."""
        due = await runstore.next_deadline(self.db)
        if due is not None and due <= time.time():
            await self._end_late()
            due = await runstore.next_deadline(self.db)
        return due

    async def _end_late(self) -> list[Run]:
        late = await runstore.expire_late(self.db, time.time())
        await self.db.durable()
        for run in late:
            self._ended_run(run)
        return late

    async def confirm(self, run: Run) -> bool:
        """Whether a run handed out already claimed (recorded `running` by `submit`) is on disk; False when
        its commit failed: the run does not exist, and its turn must not run."""
        commit = self._recorded.pop(run.id, None)
        if commit is None:
            return True
        try:
            await self.db.durable(commit)
        except StoreError:
            self._owned.discard(run.id)
            return False
        return True

    def release(self, session_id: str) -> None:
        """The workers stopped working the session (its queue was empty): a new run hands it out again, as does
        one queued while its worker was looking."""
        self._handed.discard(session_id)
        self._profiles.pop(session_id, None)
        self._behind.pop(session_id, None)  # what its next worker finds, it reads
        claimed = self._claimed_first.pop(session_id, None)
        if claimed is not None or session_id in self._again:
            self._again.discard(session_id)
            self._hand(session_id, claimed)

    def owns(self, run_id: str) -> bool:
        """Whether the run is claimed here and its turn still to run (not being ended)."""
        return run_id in self._owned and run_id not in self._saving

    @property
    def slots(self) -> FairSlots:
        """The turn slots: at most `max_concurrent_turns` turns at once in this process, a fair share per profile."""
        return self._slots

    async def profile_of(self, session_id: str) -> str:
        """The profile a session with runs belongs to (whose share of the slots its turns take)."""
        profile = self._profiles.get(session_id)
        if profile is None:
            profile = self._profiles[session_id] = await runstore.profile_of_session(self.db, session_id)
        return profile

    @contextlib.asynccontextmanager
    async def waiting(self, profile: str) -> AsyncIterator[None]:
        """A turn that waits on another run gives its slot back meanwhile, so waits cannot starve the workers."""
        self._slots.release(profile)
        try:
            yield
        finally:
            # Shielded: a turn stopped while it waits for a slot still takes it back, so the drain that
            # releases it on leaving never frees a slot it does not hold.
            await asyncio.shield(self._slots.acquire(profile))

    @property
    def running(self) -> int:
        """How many turns run in this process now."""
        return len(self._turns)

    def track(self, run_id: str, turn: Turn) -> None:
        """A turn runs here (until `untrack`): `stop` can interrupt it."""
        self._turns[run_id] = turn

    def untrack(self, run_id: str) -> None:
        self._turns.pop(run_id, None)

    async def finish(
        self,
        run: Run,
        state: RunState,
        *,
        reply: str | None = None,
        error: str | None = None,
        code: str | None = None,
        messages: list[Message] | None = None,
        spent: runstore.Spent = runstore.NOTHING_SPENT,
        steered: Sequence[str] = (),
        question: questionstore.NewQuestion | None = None,
        consumed: Mapping[str, Consumed] | None = None,
    ) -> Run:
        """End a run this process claimed: its messages, its state and what its turn spent commit together, and
        only once they are on disk is the end told (events, waiters, wake-ups). With a `question` (the turn asked
        its person) the run is parked `input_required` with it instead: not ended, nobody is told of an end.

        A save that fails (a full disk, a lock held too long) keeps the end in memory and is retried until it
        succeeds, the run's lease kept meanwhile: the turn is never run again for it. Cancelled (a shutdown)
        while retrying, it tries once more; what cannot be saved then is requeued by `close`."""
        self._saving.add(run.id)
        # What is queued in its session from here on, the end's own look (`Ended.queued_behind`) or the next
        # hand-out sees: its worker claims next with no read of its own.
        self._again.discard(run.session_id)
        self._behind.pop(run.session_id, None)
        save: Callable[[], Awaitable[runstore.Ended]] = functools.partial(
            runstore.finish,
            self.db,
            run,
            owner=self.owner,
            state=state,
            reply=reply,
            error=error,
            error_code=code,
            messages=messages,
            spent=spent,
            steered=bool(steered),
            trace_span=self.spans.carrier(run.id),
            consumed=consumed,
        )
        if question is not None:
            save = functools.partial(self._park, run, question, messages, spent, consumed)
        finished: Run | None = None
        delay = SAVE_RETRY_FIRST
        try:
            while True:
                try:
                    await self.db.writable()
                    began = time.perf_counter()
                    ended = await save()
                    await self.db.durable()
                    finished = ended.run
                    if finished is not None and ended.queued_behind is not None:
                        self._behind[run.session_id] = ended.queued_behind
                    self._saved(time.perf_counter() - began)
                    break
                except StoreError as exc:
                    if delay == SAVE_RETRY_FIRST:
                        log.error(
                            "run %s ended but its end could not be saved; kept and retried: %s", run.id, exc.message
                        )
                    try:
                        await asyncio.sleep(delay)
                    except asyncio.CancelledError:
                        with contextlib.suppress(StoreError):  # committed with the stop's last group, if it can
                            await save()
                        raise
                    delay = min(delay * 2, SAVE_RETRY_MAX)
        finally:
            self._saving.discard(run.id)
        if delay != SAVE_RETRY_FIRST:
            log.info("run %s: its end is saved now", run.id)
        self._owned.discard(run.id)
        if finished is None:
            log.warning("run %s was no longer ours to finish (lease lost)", run.id)
            finished = await runstore.get(self.db, run.id)
        if finished.state is RunState.INPUT_REQUIRED:  # it waits for its person: its waiters keep waiting
            self.spans.cut(run.id, "its turn asked its person: it runs again once answered", code="input_required")
            self._on_state(finished, finished.state)
            if question is not None:
                self.hub.publish(Asked(run.id, question_id=question.id, question=question.question))
            done = self._done.pop(run.id, None)  # waiters that stop at an interrupted state look (`wait`)
            if done is not None and not done.done():
                done.set_result(finished)
            return finished
        self._ended_run(finished)
        for run_id in steered:  # the messages steered into the turn ended with it
            try:
                joined = await self.get(run_id)
            except StoreError as exc:  # its waiters read the store once it answers; a wake is owed from there
                log.warning("run %s ended with the turn it was steered into; not told yet: %s", run_id, exc.message)
                continue
            if joined.state.terminal:
                self._ended_run(joined)
        return finished

    async def _park(
        self,
        run: Run,
        question: questionstore.NewQuestion,
        messages: list[Message] | None,
        spent: runstore.Spent,
        consumed: Mapping[str, Consumed] | None,
    ) -> runstore.Ended:
        parked = await questionstore.park(
            self.db,
            run,
            question,
            owner=self.owner,
            messages=messages,
            spent=spent,
            trace_span=self.spans.carrier(run.id),
            consumed=consumed,
        )
        return runstore.Ended(parked[0] if parked is not None else None, None)  # its queue not read: claims look

    async def resume(self, question_id: str, *, state: str, answer: str | None, by: str) -> Run:
        """Close a question once (answered, defaulted or cancelled: `questionstore.close`) and hand its run, queued
        again, to the workers."""
        _, run = await questionstore.close(self.db, question_id, state=state, answer=answer, by=by)
        self._on_state(run, run.state)
        self._hand(run.session_id, None)
        return run

    def _ended_run(self, run: Run) -> None:
        self._on_state(run, run.state)
        self.spans.end(run)
        self.hub.publish(ended(run))
        done = self._done.pop(run.id, None)
        if done is not None and not done.done():
            done.set_result(run)
        if run.wake and run.sender_session:
            self._ended.put_nowait(run)

    async def ended(self) -> Run:
        """The next run that ended after its sender stopped waiting for it (to wake that sender)."""
        return await self._ended.get()

    # --- reading and stopping ------------------------------------------------------------------

    async def get(self, run_id: str) -> Run:
        return await runstore.get(self.db, run_id)

    async def queue_position(self, run: Run) -> int | None:
        return await runstore.queue_position(self.db, run)

    async def runs_ahead(self, run: Run) -> int:
        return await runstore.runs_ahead(self.db, run)

    async def wait(
        self, run_id: str, timeout: float | None, *, known: Run | None = None, interrupted: bool = False
    ) -> Run:
        """The run once it is terminal, or as it is when `timeout` seconds have passed; `interrupted`: also once it
        waits for its person's answer (`input_required`, where A2A's blocking send returns).

        `known` is the run as the caller just saw it (saves reading it again)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        run = known if known is not None and known.id == run_id else await runstore.get(self.db, run_id)
        while not run.state.terminal and run.state is not RunState.HELD:  # a held run waits for a person
            if interrupted and run.state is RunState.INPUT_REQUIRED:
                return run
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return run
            done = self._done.get(run_id)
            if done is None:
                done = self._done[run_id] = asyncio.get_running_loop().create_future()
            # The poll bound also notices a run finished by another process on the same home.
            step = self.poll_seconds * 4 if remaining is None else min(remaining, self.poll_seconds * 4)
            # asyncio.wait leaves `done` alone on a timeout or a cancel (other waiters share it), and wakes this
            # task one loop iteration sooner than wait_for(shield(done)) did.
            ended, _ = await asyncio.wait((done,), timeout=step)
            run = done.result() if ended else await runstore.get(self.db, run_id)
        return run

    async def ask_wake(self, run_id: str) -> bool:
        """The sender stopped waiting: wake it with the outcome. False when the run already ended."""
        return await runstore.ask_wake(self.db, run_id)

    async def stop(self, run_id: str) -> Run:
        """Cancel a run that has not begun (queued, or held for the person: it was never run, like a queued one) or
        waits for its person's answer (its question is cancelled with it), or interrupt a running turn at once,
        keeping its partial output. Its sender is told as of any end."""
        run = await runstore.get(self.db, run_id)
        if run.state in (RunState.QUEUED, RunState.HELD, RunState.INPUT_REQUIRED):
            cancelled = await runstore.cancel_waiting(self.db, run_id)
            if cancelled is not None:
                await self.db.durable()
                self._ended_run(cancelled)
                return cancelled
            run = await runstore.get(self.db, run_id)
        if run_id in self._saving:  # its turn is over and its end being saved: that end is the answer
            return await self.wait(run_id, timeout=None)
        turn = self._turns.get(run_id)
        if run.id in self._owned and turn is None:  # claimed here, its turn not begun yet
            return await self.finish(run, RunState.CANCELLED, error="stopped on request", code="cancelled")
        if run.state is RunState.RUNNING:
            if turn is None:
                raise Conflict(f"run {run_id!r} is running in another process; stop it there", code="run_not_active")
            turn.progress.stop_requested = True
            turn.task.cancel()
            return await self.wait(run_id, timeout=None)
        return run

    # --- leases --------------------------------------------------------------------------------

    async def renew(self) -> None:
        """Keep this process's leases fresh; requeue runs that a dead process left running.

        Runs this process holds are never requeued here, even when their lease ran out while the store could
        not be written (a full disk): their turn is running or their end is being saved."""
        await runstore.renew_leases(self.db, list(self._owned), owner=self.owner, lease_seconds=self.lease_seconds)
        if await self.reclaim(is_dead=owner_is_dead, keep=self._owned):
            await self._taken_over()

    async def requeue_gone(self) -> list[Run]:
        """Requeue at once the running turns of another gateway of a shared store that ended (its liveness lock
        is free: `store.pg_liveness`), on whatever machine it ran, instead of when their lease runs out."""
        gone = await runstore.owners_gone(self.db, mine=self.owner)
        if not gone:
            return []
        changed = await self.reclaim(is_dead=gone.__contains__, keep=self._owned)
        for run in changed:
            log.warning("run %s requeued at once: the gateway that ran its turn has ended", run.id)
        freed = await runstore.free_sessions(self.db, gone)  # its sessions taken by whoever claims in them next
        if changed or freed:
            await self._taken_over()
        return changed

    async def _taken_over(self) -> None:
        await self.discover()
        # A process that died may also have died between a run's end and its sender's wake-up: owed here now
        # (a wake is keyed once per run, so one already made is not made again).
        for run in await runstore.pending_wakes(self.db):
            self._ended.put_nowait(run)

    async def reclaim(
        self, *, is_dead: Callable[[str], bool], attempts_bonus: int = 0, keep: set[str] | None = None
    ) -> list[Run]:
        changed = await runstore.reclaim(
            self.db, is_dead=is_dead, max_attempts=self.settings.max_attempts + attempts_bonus, keep=keep or set()
        )
        for run in changed:
            self._owned.discard(run.id)
            self.steers.add(run.session_id)  # what its turn had taken in is given to its next attempt
            if run.state.terminal:
                self._ended_run(run)
        return changed


def owner_is_dead(owner: str) -> bool:
    """Whether the process named in a run's owner (`host:pid:token`) is known to be gone: only a process of this
    machine can be looked at; one of another machine (gateways sharing a store) is gone when its lease ran out."""
    parts = owner.split(":")
    if len(parts) == 3:
        host, pid_text = parts[0], parts[1]
        if host != HOST:
            return False
    else:  # `pid:token`, as runs claimed before owners named their machine say it
        pid_text = parts[0]
    return not pid_text.isdigit() or not procs.alive(int(pid_text))
