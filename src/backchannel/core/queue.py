"""The runtime: per-session workers that run queued runs one at a time, in order, durably.

Used in-process by the gateway and by the CLI when no gateway runs; several runtimes (processes)
on one home coordinate through state.db: a run is claimed by one guarded UPDATE, a session never
has two running runs, and runs left `running` by a dead process are requeued on start.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..agent.engines import Engine, build_engine
from ..agent.loop import TurnProgress, run_turn
from ..agent.tools.base import Tool, ToolContext
from ..errors import BackchannelError, Conflict
from ..framing import frame
from ..home import config
from ..home.profiles import Profile, load_profile
from ..messages import Message
from ..store import runs as runstore
from ..store import sessions as sessionstore
from ..store.db import Database
from ..store.runs import RunRow, RunState
from .events import EventHub

log = logging.getLogger("backchannel.runtime")
WAKE_PREFIX = "wake:"
MAX_DERIVED_RETRIES = 50
CHECKPOINT_SECONDS = 0.5
CHECKPOINT_PAGES = 1000  # SQLite's own default threshold

EngineFactory = Callable[[Profile, Callable[[str], str | None]], Engine]
ToolsFactory = Callable[["Runtime", Profile], Mapping[str, Tool]]


def default_tools(runtime: Runtime, profile: Profile) -> Mapping[str, Tool]:
    from ..agent.tools import memory

    return {memory.TOOL.name: memory.TOOL}


@dataclass
class _Turn:
    task: asyncio.Task[str]
    progress: TurnProgress
    stop_requested: bool = False


class Runtime:
    def __init__(
        self,
        root: Path,
        *,
        engine_factory: EngineFactory = build_engine,
        tools_factory: ToolsFactory = default_tools,
        lease_seconds: float = 30.0,
        poll_seconds: float = 0.25,
        scope: set[str] | None = None,
    ) -> None:
        """`scope` limits the sessions whose queues this runtime works (None: all), e.g. for a one-off CLI turn."""
        self.root = root
        self.settings = config.load_gateway_config(root)
        self.db = Database(config.db_path(root))
        self.owner = f"{os.getpid()}:{secrets.token_hex(4)}"
        self.events = EventHub()
        self._engine_factory = engine_factory
        self.tools_factory = tools_factory
        self._lease = lease_seconds
        self._poll = poll_seconds
        self.scope = scope
        self._engines: dict[str, tuple[Any, Engine]] = {}
        self._retired: list[Engine] = []
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._turns: dict[str, _Turn] = {}
        self._done: dict[str, asyncio.Future[RunRow]] = {}  # run id -> its end, for waiters in this process
        self._owned: set[str] = set()  # runs this runtime claimed and has not finished: their leases are renewed
        self._slots = asyncio.Semaphore(max(1, self.settings.max_concurrent_turns))
        self._background: list[asyncio.Task[None]] = []
        self._accepting = False  # workers run only between start() and close()
        self._closing = False
        self.on_state: Callable[[RunRow], None] = lambda run: None
        # Set by the messaging layer: rewrites a person's prompt before the turn (mentions).
        self.prepare: Callable[[RunRow, Profile], Awaitable[str]] | None = None
        self.jobs: list[Callable[[], Coroutine[Any, Any, None]]] = []  # run beside the workers while started

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        self.db.group_commits(asyncio.get_running_loop())
        for run in runstore.reclaim(self.db, is_dead=_owner_is_dead, max_attempts=self.settings.max_attempts):
            log.info("run %s reclaimed after an interrupted turn (attempt %d)", run.id, run.attempts)
        self._accepting = True
        seen = self.db.data_version()  # before the scan: a commit after it is noticed by _watch
        for run in runstore.pending_wakes(self.db):
            self._wake(run)
        self._discover()
        self.db.defer_checkpoints()
        self._background = [
            asyncio.create_task(self._watch(seen)),
            asyncio.create_task(self._renew()),
            asyncio.create_task(self._checkpoints()),
            *(asyncio.create_task(job()) for job in self.jobs),
        ]

    async def close(self, *, grace: float = 10.0) -> None:
        """Stop taking work; let running turns finish within `grace`, then requeue what is left."""
        self._accepting = False
        self._closing = True
        for task in self._background:
            task.cancel()
        workers = list(self._workers.values())
        if workers:  # each worker ends after its current turn (and its commit), or is cut at the grace
            await asyncio.wait(workers, timeout=grace)
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, *self._background, return_exceptions=True)
        runstore.reclaim(
            self.db, is_dead=lambda owner: owner == self.owner, max_attempts=self.settings.max_attempts + 1
        )
        await self.db.durable()
        self.db.checkpoint()
        for engine in [*(e for _, e in self._engines.values()), *self._retired]:
            await engine.aclose()
        self.db.close()

    # --- delivery ------------------------------------------------------------------------------

    def profile(self, name: str) -> Profile:
        return load_profile(self.root, name)

    def submit(
        self,
        *,
        profile: str,
        session_id: str,
        message: str,
        sender: str,
        idempotency_key: str | None = None,
        hops: int = 0,
        chain: tuple[str, ...] = (),
        origin: str | None = None,
        sender_profile: str | None = None,
        sender_session: str | None = None,
        wait_seconds: float | None = None,
        wake: bool = False,
    ) -> tuple[RunRow, bool]:
        """Record a run (or find the one filed under the same key) and queue it; returns (run, created)."""
        if self._closing:
            raise BackchannelError("the gateway is shutting down; try again shortly", code="gateway_draining")
        new = runstore.NewRun(
            sender=sender,
            profile=profile,
            session_id=session_id,
            message=message,
            idempotency_key=idempotency_key or "",
            hops=hops,
            chain=chain,
            ttl_seconds=self.settings.run_ttl_seconds or None,
            origin=origin,
            sender_profile=sender_profile,
            sender_session=sender_session,
            wait_seconds=wait_seconds,
            wake=wake,
        )
        # An idle session's run is recorded already claimed, when a turn slot is free here.
        claim = self._accepting and session_id not in self._workers and not self._slots.locked()
        claim_for = self.owner if claim else None
        if idempotency_key:
            run, created = runstore.record(self.db, new, claim_for=claim_for, lease_seconds=self._lease)
        else:
            run, created = self._record_derived(new, claim_for)
        if created:
            if run.state is RunState.RUNNING:  # accepted and started at once: both transitions are reported
                self.on_state(dataclasses.replace(run, state=RunState.QUEUED, attempts=0))
            self.on_state(run)
            if run.state is RunState.RUNNING:
                self._owned.add(run.id)
                self._kick(session_id, first=run)
            else:
                self._kick(session_id)
        return run, created

    def _record_derived(self, new: runstore.NewRun, claim_for: str | None) -> tuple[RunRow, bool]:
        """A send without a key is deduplicated on its content within the window, unless that run failed:
        sending the same words again after a failure is a new attempt, not a replay of the failure."""
        base = runstore.derived_key(
            new.sender, new.session_id, new.message, window=self.settings.dedup_window_seconds, now=time.time()
        )
        for attempt in range(MAX_DERIVED_RETRIES):
            key = base if attempt == 0 else f"{base}:retry{attempt}"
            run, created = runstore.record(
                self.db, dataclasses.replace(new, idempotency_key=key), claim_for=claim_for, lease_seconds=self._lease
            )
            if created or run.state not in (RunState.FAILED, RunState.CANCELLED, RunState.EXPIRED):
                return run, created
        return run, created

    async def wait(self, run_id: str, timeout: float | None, *, known: RunRow | None = None) -> RunRow:
        """The run once it is terminal, or as it is when `timeout` seconds have passed.

        `known` is the run as the caller just saw it (saves reading it again)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        run = known if known is not None and known.id == run_id else runstore.get(self.db, run_id)
        while not run.state.terminal:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return run
            done = self._done.get(run_id)
            if done is None:
                done = self._done[run_id] = asyncio.get_running_loop().create_future()
            # The poll bound also notices a run finished by another process on the same home.
            step = self._poll * 4 if remaining is None else min(remaining, self._poll * 4)
            try:
                run = await asyncio.wait_for(asyncio.shield(done), timeout=step)
            except TimeoutError:
                run = runstore.get(self.db, run_id)
        return run

    async def stop(self, run_id: str) -> RunRow:
        """Cancel a queued run, or interrupt a running turn at once, keeping its partial output."""
        run = runstore.get(self.db, run_id)
        if run.state is RunState.QUEUED and runstore.cancel_queued(self.db, run_id):
            self._finished(runstore.get(self.db, run_id))
        elif run.id in self._owned and run.id not in self._turns:  # claimed here, its turn not begun yet
            self._finish(run, RunState.CANCELLED, error="stopped on request", code="cancelled")
        elif run.state is RunState.RUNNING or run.state is RunState.QUEUED:
            turn = self._turns.get(run_id)
            if turn is None:
                raise Conflict(f"run {run_id!r} is running in another process; stop it there", code="run_not_active")
            turn.stop_requested = True
            turn.task.cancel()
            return await self.wait(run_id, timeout=None)
        return runstore.get(self.db, run_id)

    def queue_position(self, run: RunRow) -> int | None:
        return runstore.queue_position(self.db, run)

    # --- workers -------------------------------------------------------------------------------

    def _discover(self) -> None:
        """Work the queues found in the store (within `scope`); runs submitted here are kicked directly."""
        for session_id in runstore.sessions_with_queued(self.db):
            if self.scope is None or session_id in self.scope:
                self._kick(session_id)

    def _kick(self, session_id: str, first: RunRow | None = None) -> None:
        if self._accepting and session_id not in self._workers:
            self._workers[session_id] = asyncio.create_task(self._drain(session_id, first))

    async def _drain(self, session_id: str, first: RunRow | None) -> None:
        try:
            while self._accepting:
                async with self._slots:
                    run, first = first, None
                    if run is None:
                        run = runstore.claim_next(self.db, session_id, owner=self.owner, lease_seconds=self._lease)
                        if run is None:
                            break  # no await between the empty claim and leaving: a new submit kicks anew
                        self._owned.add(run.id)
                        self.on_state(run)
                    await self._execute(run)
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug must not silently stop a session's queue
            log.exception("worker of session %s failed", session_id)
        finally:
            self._workers.pop(session_id, None)

    async def _execute(self, run: RunRow) -> None:
        if run.id not in self._owned:
            return  # stopped between its claim and its turn
        self.events.publish(run.id, "run.started", session_id=run.session_id)
        progress = TurnProgress()
        try:
            profile = self.profile(run.profile)
            turn = asyncio.create_task(self._turn(run, profile, progress))
        except BackchannelError as exc:
            self._finish(run, RunState.FAILED, error=exc.message, code=exc.code)
            return
        self._turns[run.id] = entry = _Turn(turn, progress)
        try:
            reply = await turn
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if entry.stop_requested and not (current and current.cancelling()):
                self._finish(
                    run,
                    RunState.CANCELLED,
                    reply=progress.output() or None,
                    error="stopped on request",
                    code="cancelled",
                    messages=progress.messages,
                )
                return
            raise  # shutting down: the run stays ours and is requeued by close()
        except BackchannelError as exc:
            self._finish(run, RunState.FAILED, error=exc.message, code=exc.code)
        except Exception as exc:
            log.exception("turn of run %s failed", run.id)
            self._finish(run, RunState.FAILED, error=f"internal error: {exc!r}", code="internal_error")
        else:
            self._finish(run, RunState.COMPLETED, reply=reply, messages=progress.messages)
        finally:
            self._turns.pop(run.id, None)

    async def _turn(self, run: RunRow, profile: Profile, progress: TurnProgress) -> str:
        engine = self._engine(profile)
        history = sessionstore.list_messages(self.db, run.session_id) if engine.uses_context else []
        text = await self.prepare(run, profile) if self.prepare is not None else run.message
        via = "a reply to your message" if run.idempotency_key.startswith(WAKE_PREFIX) else "send_to_session"
        incoming = Message(role="user", content=frame(run.sender, text, via=via))
        ctx = ToolContext(
            profile=profile,
            session_id=run.session_id,
            run_id=run.id,
            hops=run.hops,
            chain=run.chain,
            services={"runtime": self},
        )

        def emit(event: str, **data: Any) -> None:
            self.events.publish(run.id, event, **data)

        return await run_turn(
            engine=engine,
            profile=profile,
            history=history,
            incoming=incoming,
            tools=self.tools_factory(self, profile),
            ctx=ctx,
            progress=progress,
            emit=emit,
        )

    def _finish(
        self,
        run: RunRow,
        state: RunState,
        *,
        reply: str | None = None,
        error: str | None = None,
        code: str | None = None,
        messages: list[Message] | None = None,
    ) -> None:
        self._owned.discard(run.id)
        finished = runstore.finish(
            self.db, run.id, owner=self.owner, state=state, reply=reply, error=error, error_code=code, messages=messages
        )
        if finished is None:
            log.warning("run %s was no longer ours to finish (lease lost)", run.id)
            finished = runstore.get(self.db, run.id)
        self._finished(finished)

    def _finished(self, run: RunRow) -> None:
        self.on_state(run)
        data: dict[str, Any] = {"session_id": run.session_id}
        if run.state is RunState.COMPLETED:
            data["output"] = run.reply or ""
        else:
            data.update(error=run.error, code=run.error_code, output=run.reply)
        self.events.publish(run.id, f"run.{run.state.value}", **data)
        done = self._done.pop(run.id, None)
        if done is not None and not done.done():
            done.set_result(run)
        self._wake(run)

    def _wake(self, run: RunRow) -> None:
        """Deliver a finished run's reply into the session of the agent that stopped waiting for it."""
        if not (run.wake and run.sender_session and run.state.terminal):
            return
        outcome = run.reply if run.state is RunState.COMPLETED else f"({run.state.value}: {run.error or 'no reply'})"
        first_line = run.message.strip().splitlines()[0][:120] if run.message.strip() else ""
        text = f"[Reply to your message {run.id} ({first_line!r})]\n{outcome or '(no reply)'}"
        try:
            sender = sessionstore.get_session(self.db, run.sender_session)
            self.submit(
                profile=sender.profile,
                session_id=sender.id,
                message=text,
                sender=f"{run.profile}/{run.session_id}",
                idempotency_key=f"{WAKE_PREFIX}{run.id}",
                hops=run.hops + 1,
                origin=run.origin,
            )
        except BackchannelError as exc:  # retried by the pending-wakes scan at the next start
            log.warning("reply of run %s not yet delivered to session %s: %s", run.id, run.sender_session, exc.message)

    @contextlib.asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        """A turn that waits on another run gives its slot back meanwhile, so waits cannot starve the workers."""
        self._slots.release()
        try:
            yield
        finally:
            await self._slots.acquire()

    def _engine(self, profile: Profile) -> Engine:
        """One engine per profile, made again when its model settings change."""
        cached = self._engines.get(profile.name)
        if cached is None or (cached[0] is not profile.config.model and cached[0] != profile.config.model):
            if cached is not None:
                self._retired.append(cached[1])  # closed with the runtime: a turn may still be using it
            cached = self._engines[profile.name] = (profile.config.model, self._engine_factory(profile, self.secret))
        return cached[1]

    def secret(self, name: str) -> str | None:
        return config.secret_value(self.root, name)

    async def _watch(self, seen: int) -> None:
        """Notice runs queued by another process on the same home (a CLI beside the gateway)."""
        while True:
            await asyncio.sleep(self._poll)
            version = self.db.data_version()
            if version != seen:
                seen = version
                self._discover()

    async def _checkpoints(self) -> None:
        """Checkpoint the WAL in a worker thread, so the fsync it needs never stalls the event loop."""
        while True:
            await asyncio.sleep(CHECKPOINT_SECONDS)
            if self.db.wal_pages() >= CHECKPOINT_PAGES:
                await asyncio.to_thread(self.db.checkpoint)

    async def _renew(self) -> None:
        """Keep our turns' leases fresh, and requeue runs that another, dead process left running."""
        while True:
            await asyncio.sleep(self._lease / 3)
            runstore.renew_leases(self.db, list(self._owned), owner=self.owner, lease_seconds=self._lease)
            if runstore.reclaim(self.db, is_dead=_owner_is_dead, max_attempts=self.settings.max_attempts):
                self._discover()


def _owner_is_dead(owner: str) -> bool:
    pid_text = owner.partition(":")[0]
    if not pid_text.isdigit():
        return True
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
