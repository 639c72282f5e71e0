"""Live run events: `core.queue.events.EventHub` (publish, follow, reserve, bounded retention).

Contract: the module docstring of `backchannel.core.queue.events` — a buffer per run that late subscribers
replay, then follow until the run's terminal event; `None` from `follow` means "still alive" (a
keepalive after `keepalive` seconds without an event); finished runs keep their buffer among the last
RETAIN_RUNS (RETAIN_SECONDS at most); `reserve()` keeps a run's events for a follower that subscribes a
moment later with `follow(reserved=True)`. Nothing is published after a run's terminal event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from backchannel.core.queue import events
from backchannel.core.queue.events import RETAIN_RUNS, EventHub
from backchannel.events import Event as RunEvent
from backchannel.events import event_of

pytestmark = pytest.mark.quick  # pure: no home on disk, no process, no gateway (make quick)

Event = dict[str, Any]
WITHIN = 5.0  # seconds: every await here ends long before, or the hub is broken
LONG = 60.0  # a keepalive that never fires within a test


def run(body: Callable[[], Awaitable[None]]) -> None:
    async def main() -> None:
        async with asyncio.timeout(WITHIN):
            await body()

    asyncio.run(main())


def said(run_id: str, name: str, **data: Any) -> RunEvent:
    """An event as its JSON object names it (`backchannel.events.event_of`)."""
    return event_of({"event": name, "run_id": run_id, **data})


def objects(found: list[RunEvent | None]) -> list[Event | None]:
    return [None if e is None else e.to_dict() for e in found]


async def collect(hub: EventHub, run_id: str, *, reserved: bool = False) -> list[Event | None]:
    return objects([e async for e in hub.follow(run_id, keepalive=LONG, reserved=reserved)])


def names(found: list[Event | None]) -> list[str | None]:
    return [None if e is None else e["event"] for e in found]


def finish(hub: EventHub, run_id: str) -> None:
    hub.publish(said(run_id, "run.started"))
    hub.publish(said(run_id, "run.completed", output="done"))


def test_a_late_subscriber_replays_every_event_of_a_finished_run() -> None:
    async def body() -> None:
        hub = EventHub()
        hub.publish(said("r1", "run.started", session_id="s1"))
        hub.publish(said("r1", "tool.started", tool="memory"))
        hub.publish(said("r1", "run.completed", output="the reply"))
        found = await collect(hub, "r1")
        assert names(found) == ["run.started", "tool.started", "run.completed"]
        assert all(e is not None and e["run_id"] == "r1" and isinstance(e["timestamp"], float) for e in found)
        assert found[0] is not None and found[0]["session_id"] == "s1"
        assert found[-1] is not None and found[-1]["output"] == "the reply"
        # and a second late subscriber sees the same
        assert await collect(hub, "r1") == found

    run(body)


def test_a_follower_sees_past_and_future_events_until_the_terminal_one() -> None:
    async def body() -> None:
        hub = EventHub()
        hub.publish(said("r1", "run.started"))
        seen: list[Event | None] = []
        first_seen = asyncio.Event()

        async def follow() -> None:
            async for event in hub.follow("r1", keepalive=LONG):
                seen.extend(objects([event]))
                first_seen.set()

        follower = asyncio.create_task(follow())
        await first_seen.wait()  # it replayed the past event and now waits for more
        hub.publish(said("r1", "assistant.delta", delta="par"))
        hub.publish(said("r1", "assistant.delta", delta="tial"))
        hub.publish(said("r1", "run.failed", error="boom"))
        await follower  # ends by itself with the terminal event
        assert names(seen) == ["run.started", "assistant.delta", "assistant.delta", "run.failed"]
        assert [e["delta"] for e in seen if e is not None and e["event"] == "assistant.delta"] == ["par", "tial"]

    run(body)


@pytest.mark.parametrize("terminal", ["run.completed", "run.failed", "run.cancelled", "run.expired"])
def test_every_terminal_event_ends_the_stream(terminal: str) -> None:
    async def body() -> None:
        hub = EventHub()
        hub.publish(said("r1", "run.started"))
        hub.publish(said("r1", terminal))
        assert names(await collect(hub, "r1")) == ["run.started", terminal]

    run(body)


def test_a_quiet_run_gets_a_keepalive_none_after_the_timeout() -> None:
    async def body() -> None:
        hub = EventHub()
        hub.publish(said("r1", "run.started"))
        stream = hub.follow("r1", keepalive=0.02)
        first = await anext(stream)
        assert first is not None and first.name == "run.started"
        assert await anext(stream) is None  # nothing happened within the keepalive
        assert await anext(stream) is None  # and again: the stream stays open
        hub.publish(said("r1", "run.completed"))
        last = await anext(stream)
        assert last is not None and last.name == "run.completed"
        with pytest.raises(StopAsyncIteration):
            await anext(stream)

    run(body)


def test_publish_after_the_terminal_event_is_ignored() -> None:
    async def body() -> None:
        hub = EventHub()
        hub.publish(said("r1", "run.started"))
        hub.publish(said("r1", "run.completed", output="first"))
        hub.publish(said("r1", "assistant.delta", delta="late"))
        hub.publish(said("r1", "run.failed", error="late"))
        hub.publish(said("r1", "run.completed", output="second"))
        found = await collect(hub, "r1")
        assert names(found) == ["run.started", "run.completed"]
        assert found[-1] is not None and found[-1]["output"] == "first"

    run(body)


def test_a_terminal_event_of_a_run_with_no_buffer_is_not_kept() -> None:
    hub = EventHub()
    hub.publish(said("gone", "run.completed"))  # its buffer is gone: the store has the outcome
    assert not hub.known("gone")
    hub.publish(said("live", "run.started"))
    assert hub.known("live")


def test_a_follower_that_leaves_a_run_with_no_events_leaves_nothing_behind() -> None:
    """A run that never moves while followed (held for a person who never decides, say): once its last
    follower is gone the hub keeps no entry for it; its first event makes one again, for late followers."""

    async def body() -> None:
        hub = EventHub()
        stream = hub.follow("held", keepalive=0.01)
        assert await anext(stream) is None and hub.known("held")
        await stream.aclose()
        assert not hub.known("held")
        finish(hub, "held")
        assert names(await collect(hub, "held")) == ["run.started", "run.completed"]
        hub.publish(said("busy", "run.started"))  # a run with events is kept for its later followers
        busy = hub.follow("busy", keepalive=LONG)
        assert names(objects([await anext(busy)])) == ["run.started"]
        await busy.aclose()
        assert hub.known("busy")

    run(body)


def test_finished_runs_are_retained_up_to_retain_runs() -> None:
    hub = EventHub()
    extra = 10
    ids = [f"r{i}" for i in range(RETAIN_RUNS + extra)]
    for run_id in ids:
        finish(hub, run_id)
    assert [hub.known(r) for r in ids[:extra]] == [False] * extra  # the oldest are dropped
    assert all(hub.known(r) for r in ids[extra:])  # the last RETAIN_RUNS are kept
    assert sum(hub.known(r) for r in ids) == RETAIN_RUNS


def test_a_finished_run_is_not_kept_past_retain_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "RETAIN_SECONDS", 0.0)
    hub = EventHub()
    finish(hub, "r1")
    assert not hub.known("r1")


def test_a_followed_run_is_not_dropped_under_its_follower() -> None:
    async def body() -> None:
        hub = EventHub()
        hub.publish(said("watched", "run.started"))
        stream = hub.follow("watched", keepalive=LONG)
        assert names(objects([await anext(stream)])) == ["run.started"]
        hub.publish(said("watched", "run.completed"))
        for i in range(RETAIN_RUNS + 5):  # enough finished runs to push it out, were it not followed
            finish(hub, f"other{i}")
        assert hub.known("watched")
        assert names(objects([e async for e in stream])) == ["run.completed"]
        # once its follower is gone it is retained like any finished run: the newest, so still here
        assert hub.known("watched")
        for i in range(RETAIN_RUNS):
            finish(hub, f"later{i}")
        assert not hub.known("watched")

    run(body)


def test_a_finished_run_replayed_by_a_late_follower_is_not_dropped_mid_replay() -> None:
    async def body() -> None:
        hub = EventHub()
        finish(hub, "r1")
        stream = hub.follow("r1", keepalive=LONG)
        assert names(objects([await anext(stream)])) == ["run.started"]
        for i in range(RETAIN_RUNS + 5):  # r1 is now the oldest finished run, past the limit
            finish(hub, f"other{i}")
        assert hub.known("r1")
        assert names(objects([e async for e in stream])) == ["run.completed"]

    run(body)


def test_reserve_then_follow_reserved_sees_every_event() -> None:
    async def body() -> None:
        hub = EventHub()
        hub.reserve("r1")
        hub.publish(said("r1", "run.started"))
        hub.publish(said("r1", "assistant.delta", delta="x"))
        hub.publish(said("r1", "run.completed", output="x"))
        for i in range(RETAIN_RUNS + 5):  # a busy gateway finishes many runs before the follower arrives
            finish(hub, f"other{i}")
        assert names(await collect(hub, "r1", reserved=True)) == ["run.started", "assistant.delta", "run.completed"]

    run(body)


def test_a_reserved_run_whose_first_event_is_terminal_keeps_it() -> None:
    async def body() -> None:
        hub = EventHub()
        hub.reserve("r1")
        hub.publish(said("r1", "run.failed", error="at once"))
        found = await collect(hub, "r1", reserved=True)
        assert names(found) == ["run.failed"]
        assert found[0] is not None and found[0]["error"] == "at once"

    run(body)


def test_a_reservation_is_used_up_by_its_follower() -> None:
    async def body() -> None:
        hub = EventHub()
        hub.reserve("r1")
        finish(hub, "r1")
        assert names(await collect(hub, "r1", reserved=True)) == ["run.started", "run.completed"]
        for i in range(RETAIN_RUNS):
            finish(hub, f"other{i}")
        assert not hub.known("r1")  # no follower is counted any more: it was retired like any run

    run(body)
