"""Delivery.watch: one run's typed progress, in order, through an in-process gateway (what /chat/stream and the
web view's reply stream read)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from backchannel.agent.engines.base import ModelRequest, OnDelta
from backchannel.core.delivery.admission import Attempt
from backchannel.core.delivery.delivery import WaitOver
from backchannel.core.gateway import Gateway
from backchannel.events import Chunk, Ended, Event, Queued, Started
from backchannel.messages import Message
from backchannel.outcome import Outcome
from backchannel.store.runs import RunState
from conftest import with_gateway

TICK = 0.02  # how often the watch looks at the queue while nothing happens: short, so the tests are quick


class GatedEngine:
    """A fake model that writes `partial `, then answers `ok: <text>` once `gate` is open."""

    name = "fake"
    uses_context = True
    keeps_session = False
    offers_tools = True

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started = asyncio.Event()

    async def step(self, request: ModelRequest, on_delta: OnDelta | None = None) -> Message:
        self.started.set()
        if on_delta:
            on_delta("partial ")
        await self.gate.wait()
        return Message(role="assistant", content=f"ok: {request.messages[-1].content}")

    async def aclose(self) -> None:
        return None


def run(root: Path, body: Any, engine: GatedEngine) -> None:
    with_gateway(root, body, engine_factory=lambda profile, secret: engine)


async def collect(gw: Gateway, run_id: str, wait: float | None, **kwargs: Any) -> list[Event | WaitOver]:
    """What a watch gives, the quiet ticks (None) left out."""
    return [step async for step in gw.delivery.watch(run_id, wait, tick=TICK, **kwargs) if step is not None]


def test_a_queued_run_is_watched_from_its_place_in_the_queue_to_its_end(initialised: Path) -> None:
    engine = GatedEngine()

    async def body(gw: Gateway) -> None:
        session, _ = await gw.directory.create_session("default")
        first = await gw.delivery.submit(Attempt.handed_in(session, "first", "human:api"))
        await engine.started.wait()  # the first run holds the session: the second waits behind it
        second = await gw.delivery.submit(Attempt.handed_in(session, "second", "human:api"))
        reserved = await gw.delivery.reserve_events(second.run.id)
        progress = gw.delivery.watch(second.run.id, None, tick=TICK, reserved=reserved)
        steps = [await anext(progress)]
        engine.gate.set()
        steps += [step async for step in progress if step is not None]
        assert isinstance(steps[0], Queued) and (steps[0].run_id, steps[0].ahead) == (second.run.id, 1)
        kinds = [type(s) for s in steps[1:] if not isinstance(s, Queued)]  # maybe next in line a moment first
        assert kinds == [Started, Chunk, Ended]
        chunk, end = steps[-2], steps[-1]
        assert isinstance(chunk, Chunk) and chunk.text == "partial "
        assert isinstance(end, Ended) and end.state == "completed" and end.output == "ok: second"
        result = (await gw.delivery.status(second.run.id)).result  # the outcome a watcher reads at the end
        assert result.outcome is Outcome.DELIVERED and result.run_id == second.run.id
        assert (await gw.delivery.wait(first.run.id, 30)).run.state is RunState.COMPLETED

    run(initialised, body, engine)


def test_a_run_that_ended_before_the_watch_began_gives_its_end_at_once(initialised: Path) -> None:
    engine = GatedEngine()
    engine.gate.set()
    ids: list[str] = []

    async def deliver(gw: Gateway) -> None:
        session, _ = await gw.directory.create_session("default")
        done = await gw.delivery.deliver(Attempt.handed_in(session, "hello", "human:api"), wait=30)
        assert done.run.state is RunState.COMPLETED
        ids.append(done.run.id)

    async def watch_later(gw: Gateway) -> None:  # another gateway: none of the run's live events are kept
        steps = await collect(gw, ids[0], None)
        assert len(steps) == 1
        end = steps[0]
        assert isinstance(end, Ended) and end.state == "completed" and end.output == "ok: hello"
        result = (await gw.delivery.status(ids[0])).result
        assert result.outcome is Outcome.DELIVERED and result.reply == "ok: hello"

    run(initialised, deliver, engine)
    run(initialised, watch_later, engine)


def test_the_watch_ends_with_wait_over_when_its_wait_runs_out_first(initialised: Path) -> None:
    engine = GatedEngine()

    async def body(gw: Gateway) -> None:
        session, _ = await gw.directory.create_session("default")
        sent = await gw.delivery.submit(Attempt.handed_in(session, "slow", "human:api"))
        steps = await collect(gw, sent.run.id, 0.1)
        last = steps[-1]
        assert isinstance(last, WaitOver)
        assert last.result.run_id == sent.run.id and last.result.outcome is Outcome.RECEIPT
        assert not any(isinstance(s, Ended) for s in steps)
        engine.gate.set()
        assert (await gw.delivery.wait(sent.run.id, 30)).run.state is RunState.COMPLETED

    run(initialised, body, engine)
