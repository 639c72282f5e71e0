"""The composition root: one home's store, run queue, delivery service, engines, tools and background jobs.

Everything is built once, in `Gateway.__init__`, each part given what it needs; nothing is patched
afterwards. `start` and `stop` run and end the parts together. The gateway process serves HTTP on top
of it; the CLI builds the same object when no gateway runs (optionally limited to the sessions it works).

    queue ← delivery (with directory, wakes, outbound) ← sends (the agents' Sender) ← turns (engines,
    tools, mentions) ← workers (take sessions from the queue, run their turns); hosted (the same tools
    for agents in a Hermes gateway, as the turn in progress) and imports (Hermes sessions made addressable);
    pushes (A2A push notification configs, told every run state change, and the job delivering their outbox)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from .. import tracing
from ..agent.engines import build_engine
from ..agent.engines.cache import EngineCache, EngineFactory
from ..agent.memories import FileMemories
from ..agent.tools import ASKING, TOOLBOX
from ..agent.tools.mcp import McpTools
from ..errors import ConfigError, StoreError
from ..home import config
from ..net.dialects import Dialects
from ..records import Run
from ..store import backend, meta
from ..store.db import Database
from ..store.driver import Db
from ..store.runs import RunState
from .access import Access
from .delivery.admission import Admission
from .delivery.delivery import Delivery
from .delivery.directory import Directory
from .delivery.door import Door
from .delivery.groups import Groups
from .delivery.holds import Holds
from .delivery.idle import IdleNotices
from .delivery.imports import Imports
from .delivery.mentions import Mentions
from .delivery.outbound import Outbound
from .delivery.sends import AgentSends
from .delivery.wakes import Wakes
from .facades import Admin, Hosting, Keys, Messages, Roster
from .handoffs import ChatHandoffs
from .hosted import HostedTools
from .memories import StoreMemories
from .push_bodies import PushEvents
from .pushes import Pushes
from .questions import Questions
from .queue import background
from .queue.events import EventHub
from .queue.pauses import Pauses
from .queue.queue import OnState, RunQueue
from .queue.workers import Workers
from .revocations import Revocations
from .rooms import Rooms
from .turns import Turns

if TYPE_CHECKING:
    from .metrics import Metrics

log = logging.getLogger("backchannel.gateway")


class Gateway:
    """One home, assembled: the surfaces use its facades (`messages`, `roster`, `keys`, `admin`, `hosting`) and its
    own life (`root`, `settings`, `start`, `stop` …); the rest runs beneath."""

    def __init__(
        self,
        root: Path,
        *,
        engine_factory: EngineFactory = build_engine,
        on_state: OnState | None = None,
        scope: set[str] | None = None,
        runs_turns: bool = True,
        lease_seconds: float | None = None,
        poll_seconds: float = 0.25,
        push_events: PushEvents | None = None,
        clock: Callable[[], float] = time.time,
        metrics: bool = False,
    ) -> None:
        """A damaged state.db is refused as the store is opened (`store.backend.open_store`), here as in every
        command. `push_events`: how A2A push notifications render a run (the gateway process); without it, what is
        owed waits for the gateway. `clock`: when runs are recorded (a test's own clock moves the dedup window).
        `metrics`: count what happens for GET /metrics (the gateway process; a command's in-process gateway
        does not load prometheus-client)."""
        config.require_home(root)
        config.read_env(root)  # a broken .env stops here, before anything is written
        self.root = root
        self.settings = config.load_gateway_config(root)
        self.gateway_id = self.settings.gateway_id or "local"
        # Traces where the OTEL_* variables (or a host's own provider) ask for them; nothing loaded otherwise.
        tracing.setup(attributes={"backchannel.gateway.id": self.gateway_id})
        traces = self.settings.traces
        tracing.set_content_chars(traces.content_chars if traces.content else 0)
        self.shared = backend.is_shared(self.settings)  # gateways on one PostgreSQL store, or this home's state.db
        self.db: Db = backend.open_store(root, self.settings)
        self.hub = EventHub(self.db if self.shared else None)
        self.pushes = Pushes(self.db, self.settings.push, events=push_events)
        self.metrics: Metrics | None = None
        if metrics:
            from .metrics import Metrics

            self.metrics = Metrics(self.db)
        noticed = _both(on_state, self.pushes.noticed)
        self.queue = RunQueue(
            self.db,
            self.settings,
            hub=self.hub,
            on_state=noticed if self.metrics is None else _both(noticed, self.metrics.noticed),
            saved=self.metrics.committed if self.metrics is not None else None,
            lease_seconds=lease_seconds or self.settings.store.lease_seconds,
            poll_seconds=poll_seconds,
            scope=scope,
            runs_turns=runs_turns,
            clock=clock,
        )
        self.directory = Directory(root, self.db)
        self.access = Access(self.db, profiles=self.directory.profiles)
        self.admission = Admission(
            db=self.db,
            queue=self.queue,
            directory=self.directory,
            settings=self.settings,
            gateway_id=self.gateway_id,
            shared=self.shared,
        )
        self.wakes = Wakes(self.admission)
        self.outbound = Outbound(
            root,
            self.db,
            self.wakes,
            links=Dialects(gateway_id=self.gateway_id),
            gateway_id=self.gateway_id,
            called=self.metrics.peer_call if self.metrics is not None else None,
        )
        self.delivery = Delivery(
            root=root,
            settings=self.settings,
            db=self.db,
            queue=self.queue,
            directory=self.directory,
            hub=self.hub,
            outbound=self.outbound,
            wakes=self.wakes,
            admission=self.admission,
        )
        self.holds = Holds(self.db, self.queue, self.directory, self.wakes)
        self.questions = Questions(self.db, self.queue, relay=self.outbound.answer)
        self.revocations = Revocations(self.db)
        self.engines = EngineCache(root, engine_factory)
        self.imports = Imports(self.db, self.directory, self.engines.secret)
        self.groups = Groups(root)
        self.door = Door(self.groups, self.delivery, self.imports, self.outbound)
        self.sends = AgentSends(
            db=self.db,
            queue=self.queue,
            directory=self.directory,
            outbound=self.outbound,
            delivery=self.delivery,
            imports=self.imports,
            groups=self.groups,
            questions=self.questions,
        )
        self.mentions = Mentions(self.sends)
        self.idle = IdleNotices(self.db, self.wakes)
        self.rooms = Rooms(
            root=root,
            db=self.db,
            delivery=self.delivery,
            directory=self.directory,
            outbound=self.outbound,
            owner=self.queue.owner,
        )
        self.mcp = McpTools(self.engines.secret, TOOLBOX)
        self.handoffs = ChatHandoffs(self.db)
        self.turns = Turns(
            db=self.db,
            directory=self.directory,
            engines=self.engines,
            tools={**TOOLBOX, **ASKING},  # its own agents' turns may ask their person
            sender=self.sends,
            hub=self.hub,
            prepare=self.mentions.prepare,
            mcp=self.mcp,
            memories=StoreMemories(self.db) if self.shared else FileMemories(),
            steers=self.queue.steers,
            handoffs=self.handoffs,
        )
        self.pauses = Pauses(root)
        self.workers = Workers(self.queue, self.turns, hub=self.hub, pauses=self.pauses, home=root)
        self.hosted = HostedTools(
            db=self.db,
            directory=self.directory,
            turns=self.turns,
            imports=self.imports,
            tools=TOOLBOX,
            sender=self.sends,
            mentions=self.mentions,
        )
        # What the surfaces reach: these facades, and the gateway's own life (root, settings, start, stop …).
        self.messages = Messages(self.door, self.delivery, self.outbound, self.pushes, self.questions)
        self.roster = Roster(self.directory, self.imports)
        self.keys = Keys(self.access, self.revocations)
        self.admin = Admin(self.holds, self.questions, self.rooms, self.metrics, self.said_in)
        self.hosting = Hosting(self.hosted, self.handoffs)
        self._jobs: list[asyncio.Task[None]] = []
        self._opened = False
        self._started = False
        self._closed = False

    @property
    def running_turns(self) -> int:
        """Turns running in this process now (what a stop gives its grace to)."""
        return self.queue.running

    async def open(self) -> None:
        """Connect to the store (a shared store's pool and migrations; SQLite's file was opened when built). The
        gateways on one shared store are one gateway: a home whose id is not the store's is refused."""
        if self._opened:
            return
        await self.db.open()
        self._opened = True
        if self.shared:
            owner = await meta.meta_set_default(self.db, meta.GATEWAY_ID, self.gateway_id)
            if owner != self.gateway_id:
                await self.db.aclose()
                raise ConfigError(
                    f"the store {self.db.name!r} belongs to gateway {owner!r}, and this home's config.yaml says"
                    f" {self.gateway_id!r}: gateways that share a store are one gateway; give this home"
                    f" `gateway: {{id: {owner}}}` (and the same key and profiles), or another store"
                )

    def said_in(self, room: str) -> None:
        """Someone spoke in `room`: a command's own started gateway drives it now (a gateway's rooms job finds every
        room with a round open by itself; a gateway only opened drives none)."""
        if self._started and not self._closed and self.queue.scope is not None and self.queue.runs_turns:
            self.rooms.start(room)

    async def start(self) -> None:
        """Reclaim what a crash left running, then run the workers and the background jobs."""
        await self.open()
        await self.access.load()  # the keys as they are now: what tells a made-up key from a peer's in an outage
        seen = self.db.data_version()  # before the scan: a commit after it is noticed by the watcher
        await self.queue.open()
        await self.directory.listen()
        await self.hub.start()
        self._started = True
        self._jobs = [
            asyncio.create_task(self.workers.run()),
            asyncio.create_task(self.delivery.wake_senders()),
            asyncio.create_task(self.outbound.follow_receipts()),
            asyncio.create_task(background.watch(self.db, self.queue, seen=seen)),
            asyncio.create_task(background.renew(self.queue, self.pauses)),
            asyncio.create_task(background.resume_paused(self.pauses, self.queue)),
            asyncio.create_task(self.holds.sweep()),
            asyncio.create_task(self.questions.sweep()),
            asyncio.create_task(self.idle.run()),
        ]
        if self.queue.runs_turns:  # the queued runs past their deadline ended, wherever they wait
            self._jobs.append(asyncio.create_task(background.deadlines(self.queue)))
        if self.queue.scope is None and self.queue.runs_turns:  # a gateway: it drives the rooms (a command, its own)
            self._jobs.append(asyncio.create_task(self.rooms.run()))
        if self.shared:  # another gateway's death is seen by the store at once: its turns need not wait for leases
            self._jobs.append(asyncio.create_task(background.liveness(self.queue)))
        if isinstance(self.db, Database):  # SQLite's WAL is copied back off the hot path
            self.db.defer_checkpoints()
            self._jobs.append(asyncio.create_task(background.checkpoints(self.db)))
        if self.pushes.delivers:
            self._jobs.append(asyncio.create_task(self.pushes.run()))
        if self.settings.store.keep_days and self.queue.runs_turns:  # a gateway's job, not a command's
            self._jobs.append(asyncio.create_task(background.prune(self.db, self.settings.store.keep_days)))

    async def stop(self, *, grace: float = 10.0) -> None:
        """Take no new work; let running turns finish within `grace`, requeue the rest, close everything."""
        if self._closed:
            return
        self._closed = True
        if self._started:
            self.queue.drain()
            await self.rooms.stop()  # a round is taken up again where it was, by the next to drive it
            await self.workers.stop(grace=grace)
            for task in self._jobs:
                task.cancel()
            await asyncio.gather(*self._jobs, return_exceptions=True)
            await self.hub.stop()
            try:  # a store that cannot be written (a full disk) is reported; stopping goes on whatever the disk
                await self.queue.close()
                await self.db.durable()
            except StoreError as exc:
                log.error(
                    "the last writes could not be committed (their runs run again after a restart): %s", exc.message
                )
            if isinstance(self.db, Database):
                self.db.checkpoint("TRUNCATE")
        await self.access.aclose()
        await self.mcp.aclose()
        await self.engines.aclose()
        await self.db.aclose()

    async def aclose(self) -> None:
        """Close a gateway that was never started (one used only to read, or to reach peers)."""
        if self._started:
            raise RuntimeError("a started gateway is closed with `await stop()`")
        if not self._closed:
            self._closed = True
            await self.db.aclose()

    async def __aenter__(self) -> Gateway:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


def _both(first: OnState | None, then: OnState) -> OnState:
    """One report of a run's state change to two listeners, in order."""
    if first is None:
        return then

    def both(run: Run, state: RunState) -> None:
        first(run, state)
        then(run, state)

    return both


@contextlib.asynccontextmanager
async def running(root: Path, *, grace: float = 10.0, **options: object) -> AsyncIterator[Gateway]:
    """A started gateway for the length of a block (the CLI's in-process path, tests)."""
    gateway = Gateway(root, **options)  # type: ignore[arg-type]
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.stop(grace=grace)
