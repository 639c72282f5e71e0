"""`GatewayLink` in-process: this home's gateway built by its composition root (`core.gateway`) in this process,
its queue worked only for the session a command needs (when no gateway runs, the command answers itself)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

from ..addresses import LocalAddress, Target
from ..core.delivery.delivery import Delivery, Incoming
from ..core.gateway import Gateway, running
from ..core.queue.events import Chunk, Ended, Queued, WaitOver
from ..net import wire
from ..net.link import RunEvent
from ..outcome import GroupResult, Result
from ..states import TERMINAL_EVENTS
from .link import Progress

LOCAL_GRACE = 0.5
TICK_SECONDS = 1.0  # how often a live delivery looks again at the queue


@contextlib.asynccontextmanager
async def home_gateway(root: Path) -> AsyncIterator[Gateway]:
    """This home's gateway, not started: for reading and creating sessions, the ledger, and peers."""
    gateway = Gateway(root)
    try:
        await gateway.open()
        yield gateway
    finally:
        await gateway.aclose()


class LocalGateway:
    """The gateway of the home at `root`, started in this process for as long as each call needs it."""

    via: Literal["gateway", "local"] = "local"

    def __init__(self, root: Path) -> None:
        self.root = root

    async def send(
        self,
        to: Target,
        message: str,
        *,
        wait: float | None,
        key: str,
        sender: str = "human:cli",
        progress: Progress | None = None,
        steer: bool = False,
    ) -> Result | GroupResult:
        """Through the same door as the running gateway's; what this process queues, it works (a peer member's
        message sent)."""
        async with running(self.root, scope=set(), grace=LOCAL_GRACE) as local:
            if progress is None or not isinstance(to, LocalAddress):
                return await local.door.send(to, message, sender=sender, key=key, wait=wait, steer=steer)
            session = await local.door.session(to)
            incoming = Incoming(session, message, sender, key=key, steer=steer)
            return await _live(local.delivery, incoming, wait, progress)

    async def run(self, run_id: str) -> Result:
        async with home_gateway(self.root) as gateway:
            return (await gateway.delivery.status(run_id)).result

    async def stop(self, run_id: str) -> Result:
        async with home_gateway(self.root) as gateway:
            return (await gateway.delivery.stop(run_id)).result

    async def events(self, run_id: str) -> AsyncIterator[RunEvent]:
        """The run's events until it ends, its session's queue worked here meanwhile."""
        async with home_gateway(self.root) as gateway:
            session_id = (await gateway.delivery.run(run_id)).session_id
        async with running(self.root, scope={session_id}, grace=LOCAL_GRACE) as local:
            events = local.delivery.follow(run_id)
            async with contextlib.aclosing(events):
                async for data in events:
                    if data is None:  # a keepalive
                        continue
                    event = wire.event_of(data)
                    yield event
                    if event.name in TERMINAL_EVENTS:
                        return


async def _live(delivery: Delivery, incoming: Incoming, wait: float | None, progress: Progress) -> Result:
    """Submit, then show the run's waits and its reply's text until it ends or `wait` runs out."""
    first = await delivery.submit(incoming)
    run_id, to = first.run.id, first.result.to
    result = first.result
    steps = delivery.watch(run_id, wait, tick=TICK_SECONDS, reserved=await delivery.reserve_events(run_id))
    async with contextlib.aclosing(steps):
        async for step in steps:
            if isinstance(step, Queued):
                progress.waiting(step.ahead, to)
            elif isinstance(step, Chunk):
                progress.delta(step.text)
            elif isinstance(step, (Ended, WaitOver)):
                result = step.result
    return dataclasses.replace(result, replayed=first.result.replayed)
