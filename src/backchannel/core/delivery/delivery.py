"""The delivery service: the one path of every message, whoever sends it and however it arrives.

resolve the target → check the one policy → record the run (idempotently) → queue it → wait → wake
the sender when it stopped waiting → the outcome. Transports (HTTP routes, the CLI, the tools, the
mentions, peers arriving over HTTP, wake-ups) call nothing else; messages to other gateways go on
through `Outbound`. Every method that writes returns only once its writes are committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, replace
from pathlib import Path

from ...errors import BodyTooLarge, Conflict, Forbidden, NotFound, Refused, StoreError, UsageError
from ...events import Event, Held, Queued, Started
from ...framing import is_human
from ...home.config import GatewayConfig
from ...messages import MAX_MESSAGE_CHARS, Attachment
from ...outcome import Outcome, Result, of_state
from ...records import LedgerEntry, Run, TaskQuery
from ...store import ledger
from ...store import runs as runstore
from ...store.driver import Db
from ...store.runs import RunState
from ..queue.commits import commits
from ..queue.events import EventHub, ended
from ..queue.queue import RunQueue
from .admission import Admission, Admitted, Attempt
from .admission import NewContext as NewContext  # what the A2A surface names a new context with
from .directory import Directory
from .outbound import Outbound, PeerAnswer
from .wakes import Wakes

MAX_WAIT_SECONDS = 3600.0
WAKE_RETRY_SECONDS = 5.0  # how soon a wake that could not be queued is tried again (then twice as late)
WAKE_RETRY_MAX_SECONDS = 300.0
SHORTEST_RUN_PREFIX = 8  # `run_` and four of its hex digits: fewer would name a run by chance


@dataclass(frozen=True)
class WaitOver:
    """A watcher's wait ran out with the run not ended (`Delivery.watch`): its outcome so far. The watcher's own,
    no event of the run."""

    result: Result


@dataclass(frozen=True)
class Delivered:
    """The outcome of a local message, with its run as the surfaces see it (for the dialect's shapes)."""

    run: Run
    result: Result


def check_message(message: object) -> str:
    if not isinstance(message, str) or not message.strip():
        raise UsageError("the message is empty or missing", code="missing_message")
    try:
        message.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(f"the message is not valid text: {exc.reason}", code="invalid_payload") from exc
    if len(message) > MAX_MESSAGE_CHARS:
        raise BodyTooLarge(f"the message has {len(message)} characters; at most {MAX_MESSAGE_CHARS} are accepted")
    return message


class Delivery:
    """Deliver, stream, status and stop for every transport; the outcome of every local run; refusals recorded once.

    The agents' sends (the `Sender` the tools are given) build on it in `core.sends`."""

    def __init__(
        self,
        *,
        root: Path,
        settings: GatewayConfig,
        db: Db,
        queue: RunQueue,
        directory: Directory,
        hub: EventHub,
        outbound: Outbound,
        wakes: Wakes,
        admission: Admission,
    ) -> None:
        self.root = root
        self.settings = settings
        self.db = db
        self.queue = queue
        self.directory = directory
        self.hub = hub
        self.outbound = outbound
        self.wakes = wakes
        self.admission = admission
        self.gateway_id = admission.gateway_id
        self.rates = admission.rates  # the person is never rate-limited

    # --- messages handed in by a transport -------------------------------------------------------

    @commits
    async def deliver(self, attempt: Attempt, *, wait: float | None) -> Delivered:
        """Record and queue the message, then wait up to `wait` seconds (None: until its run ends)."""
        started = time.monotonic()
        run, created = await self._accept(attempt, wait=wait)
        await self.db.durable()  # the run is on disk before it is waited for (a failed commit: 503 at once)
        run = await self.queue.wait(run.id, wait, known=run)
        return await self._delivered(run, replayed=not created, waited=time.monotonic() - started)

    @commits
    async def submit(self, attempt: Attempt, *, wait: float | None = None) -> Delivered:
        """Record and queue the message; its outcome so far (a receipt, or a replayed run's end). `wait`: how
        long its sender waits for it elsewhere (a stream)."""
        run, created = await self._accept(attempt, wait=wait)
        return await self._delivered(run, replayed=not created)

    async def steer(self, run_id: str, attempt: Attempt, *, profile: str | None = None) -> Delivered:
        """A message into the running turn of `run_id` (Hermes's POST /v1/runs/{id}/steer), as a steer into its
        session: only its own sender's (`runs.same_caller`, DESIGN 7), only while it runs. A turn that ends before
        the message is recorded leaves it queued, its own turn (`landed` says which)."""
        run = await self._run(run_id, profile=profile)
        if not runstore.same_caller(attempt.sender, run.sender):
            raise Forbidden(f"run {run_id!r} is another sender's turn: only the sender of a run steers it")
        if run.state is not RunState.RUNNING:
            raise Conflict(
                f"run {run_id!r} is {run.state.value}, not running: there is no turn to steer into",
                code="run_not_accepting_steer",
            )
        session = await self.directory.session(run.session_id, profile=run.profile)
        return await self.submit(replace(attempt, session=session, steer=True))

    async def _accept(self, attempt: Attempt, *, wait: float | None = None) -> tuple[Run, bool]:
        check_message(attempt.text)
        admitted = await self.admit(replace(attempt, wait=wait))
        if admitted.refusal is not None:
            raise Refused(admitted.refusal.reason, code=admitted.refusal.code)
        assert admitted.run is not None
        return admitted.run, admitted.created

    async def admit(self, attempt: Attempt, *, submit: bool = True) -> Admitted:
        """The one admit path (`Admission.admit`): the facts gathered, the policy's check, a refusal recorded, a
        hold, the run submitted (unless not `submit`); inside the caller's commit."""
        return await self.admission.admit(attempt, submit=submit)

    def note_bad_request(self, sender: str) -> None:
        """A peer's malformed request counts against its rate as a run it started would (the person has none)."""
        if not is_human(sender):
            self.rates.record(sender)

    # --- runs ------------------------------------------------------------------------------------

    async def run(self, run_id: str, *, profile: str | None = None) -> Run:
        """A run by id; with `profile`, only that profile's (a run id is unique across the home)."""
        return await self._run(run_id, profile=profile)

    async def _run(self, run_id: str, *, profile: str | None = None) -> Run:
        run = await self.queue.get(run_id)
        if profile is not None and run.profile != profile:
            raise NotFound(f"no run {run_id!r} in profile {profile!r}", code="run_not_found")
        return run

    async def run_id_of(self, key: str) -> str | None:
        """The id of the run a message was filed under (a local run, or a peer's run as it told us), if known yet."""
        run = await runstore.by_key(self.db, key)
        if run is not None:
            return run.id
        sent = await self.outbound.sent_with_key(key)
        return sent.remote_run_id if sent is not None else None

    async def status(self, run_id: str, *, profile: str | None = None) -> Delivered:
        return await self._delivered(await self._run(run_id, profile=profile))

    async def find_run(self, given: str, *, profile: str | None = None) -> Delivered:
        """The run `given` names: its id, or the start of one as a person copies it from a table (`run_d212…`,
        at least `SHORTEST_RUN_PREFIX` characters), when it starts one run's id only."""
        prefix = given.removesuffix("…")
        if len(prefix) < SHORTEST_RUN_PREFIX:
            raise UsageError(
                f"no run {given!r}: give a run's id, or its first {SHORTEST_RUN_PREFIX} characters or more",
                code="run_id_too_short",
            )
        found = await runstore.ids_starting(self.db, prefix, most=3)
        if found and found[0] != prefix:  # not a whole id (which sorts first among those it starts)
            if len(found) > 1:
                shown = ", ".join(found[:2])
                raise UsageError(
                    f"{given!r} starts the ids of several runs ({shown}{', …' if len(found) > 2 else ''}):"
                    " give more of it",
                    code="ambiguous_run_id",
                )
            given = found[0]
        return await self.status(given, profile=profile)

    @commits
    async def stop(self, run_id: str, *, profile: str | None = None) -> Delivered:
        await self._run(run_id, profile=profile)
        return await self._delivered(await self.queue.stop(run_id))

    async def wait(self, run_id: str, timeout: float | None, *, interrupted: bool = False) -> Delivered:
        """The run once it ended (`interrupted`: or waits for its person's answer), or as it is after `timeout`."""
        return await self._delivered(await self.queue.wait(run_id, timeout, interrupted=interrupted))

    async def watch(
        self, run_id: str, wait: float | None = None, *, tick: float = 1.0, reserved: bool = False
    ) -> AsyncGenerator[Event | WaitOver | None, None]:
        """The one way to follow a run: its events, past and future, in order, until its end or until `wait`
        seconds have passed (None: no limit); None when nothing happened for `tick` seconds.

        While it is queued: `Queued` with how many runs go before it, first as it stands and again whenever that
        changes (looked at on each quiet tick); `Held` when it waits for the person; then the events of its turn
        (`Started`, `Chunk`s, `Step`s, …) and `Ended`, or `WaitOver` once `wait` ran out first (looked at on the
        same ticks). `Ended` leaves only once the run's end is committed; a run this process has no events for (it
        ended long ago, or runs elsewhere) ends with its closing event read from the store. `reserved`: its
        events were kept for this watch (`reserve_events`)."""
        deadline = None if wait is None else time.monotonic() + wait
        run = await self.queue.get(run_id)
        if run.state.terminal and not self.hub.known(run_id):
            yield ended(run, timestamp=run.updated_at)
            return
        ahead: int | None = None
        looking = run.state in (RunState.QUEUED, RunState.HELD)  # the queue is looked at until the run starts
        if run.state is RunState.HELD:
            yield Held(run_id)
        elif run.state is RunState.QUEUED:
            self.queue.take_up(run.session_id)  # followed here: worked here too, whatever this process's scope
            ahead = await self.queue.runs_ahead(run)
            yield Queued(run_id, ahead)
        elsewhere = not self.queue.owns(run_id)  # it may run on another gateway of a shared store
        events = self.hub.follow(run_id, keepalive=tick, reserved=reserved, elsewhere=elsewhere)
        async with contextlib.aclosing(events):
            async for event in events:
                if event is None:
                    current = await self.queue.get(run_id)
                    if current.state.terminal:
                        await self.db.durable()
                        yield ended(current, timestamp=current.updated_at)
                        return
                    if looking:
                        now_ahead = await self.queue.runs_ahead(current) if current.state is RunState.QUEUED else None
                        if now_ahead is not None and now_ahead != ahead:
                            yield Queued(run_id, now_ahead)
                        ahead = now_ahead
                    if deadline is not None and time.monotonic() >= deadline:
                        yield WaitOver((await self.status(run_id)).result)
                        return
                    yield None
                    continue
                looking = looking and not isinstance(event, Started)
                if event.ends:
                    await self.db.durable()
                yield event

    async def runs_ahead(self, run_id: str) -> int | None:
        """How many runs of its session go before a queued run (the running one too); None once it left the queue."""
        run = await self.queue.get(run_id)
        return await self.queue.runs_ahead(run) if run.state is RunState.QUEUED else None

    async def reserve_events(self, run_id: str) -> bool:
        """Keep a new run's events for a stream that follows it a moment later; False when none will come."""
        if self.hub.known(run_id) or not (await self.queue.get(run_id)).state.terminal:
            self.hub.reserve(run_id)
            return True
        return False

    async def runs(
        self,
        *,
        states: tuple[RunState, ...] = (),
        profile: str | None = None,
        session_id: str | None = None,
        limit: int = 50,
    ) -> list[Delivered]:
        """This home's runs, newest first, each with its outcome so far (of one profile, or one session)."""
        if profile is not None:
            self.directory.check_profile(profile)
        found = await runstore.list_runs(self.db, states=states, profile=profile, session_id=session_id, limit=limit)
        return [await self._delivered(run) for run in found]

    async def files(self, run_ids: list[str]) -> dict[str, list[Attachment]]:
        """The files each run's message came with (runs without any left out)."""
        return await runstore.files_of(self.db, run_ids)

    async def a2a_tasks(self, query: TaskQuery, *, limit: int) -> tuple[list[Run], int]:
        """A page of what one caller sent a profile over A2A, most recently updated first, and the total."""
        self.directory.check_profile(query.profile)
        page, total = await runstore.a2a_tasks(self.db, query, limit=limit)
        return [run for run in page], total

    async def ledger(
        self,
        a: str | None = None,
        b: str | None = None,
        *,
        limit: int = 100,
        since: float | None = None,
        profile: str | None = None,
        states: tuple[str, ...] = (),
    ) -> list[LedgerEntry]:
        """Newest first; with `since`, from then on; with `profile`, only what that profile's sessions sent or
        received; with `states`, only those (`refused`: the refusals)."""
        found = await ledger.entries(self.db, a, b, limit=limit, since=since, profile=profile, states=states)
        return [e for e in found]

    async def exchange(self, run_id: str) -> list[LedgerEntry]:
        """Everything that followed from the person's message that began the exchange of `run_id`, in order."""
        run = await self._run(run_id)
        return [e for e in await ledger.exchange(self.db, run.origin or run.id)]

    async def probe_peer(self, name: str, *, timeout: float) -> PeerAnswer:
        """Whether the peer `name` answers just now (within `timeout` seconds)."""
        return await self.outbound.probe(name, timeout=timeout)

    async def load(self) -> dict[RunState, int]:
        """How many runs wait in the queues and how many turns run now, across the home."""
        return await runstore.count_by_state(self.db, (RunState.QUEUED, RunState.RUNNING))

    async def _delivered(self, run: Run, *, replayed: bool = False, waited: float = 0.0) -> Delivered:
        return Delivered(run, await self.result_of(run, replayed=replayed, waited=waited))

    async def result_of(self, run: Run, *, replayed: bool = False, waited: float = 0.0) -> Result:
        """The outcome of a local run, as its sender sees it (a receipt says how many runs are ahead of it)."""
        ahead = await self.queue.queue_position(run) if of_state(run.state) is Outcome.RECEIPT else None
        return run.result(replayed=replayed, waited=waited, queue_position=ahead)

    # --- wake-ups --------------------------------------------------------------------------------

    async def wake_senders(self) -> None:
        """Background job: every run that ended after its sender stopped waiting wakes that sender.

        A wake that cannot be queued now (a full disk, a store error) is tried again while the gateway
        runs, after WAKE_RETRY_SECONDS and then less often (up to WAKE_RETRY_MAX_SECONDS), not only at its
        next start; its key keeps it to one wake-up whatever the tries."""
        owed: dict[str, Run] = {}
        delay, next_try = WAKE_RETRY_SECONDS, 0.0
        while True:
            timeout = max(0.0, next_try - time.monotonic()) if owed else None
            try:
                run = await asyncio.wait_for(self.queue.ended(), timeout)
            except TimeoutError:
                owed = {run_id: late for run_id, late in owed.items() if not await self._wake(late)}
                delay = min(delay * 2, WAKE_RETRY_MAX_SECONDS) if owed else WAKE_RETRY_SECONDS
                next_try = time.monotonic() + delay
                continue
            if not await self._wake(run):
                if not owed:
                    next_try = time.monotonic() + delay
                owed[run.id] = run

    async def _wake(self, run: Run) -> bool:
        """Wake the sender of `run` once the write lock is ours (another process may hold it a while)."""
        try:
            await self.db.writable()
        except StoreError:
            return False
        return await self.wakes.of_run(run)

    # --- helpers ---------------------------------------------------------------------------------

    def key(self, session_id: str) -> str:
        """A session's name in wait chains, unique across gateways."""
        return self.admission.key(session_id)
