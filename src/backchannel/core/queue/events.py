"""Live run events (`backchannel.events`) for streams: a buffer per run that late subscribers replay, then follow.

Finished runs keep their buffer for a while (the last RETAIN_RUNS of them, RETAIN_SECONDS at most),
so a stream opened just after a quick run still sees all its events; later, the stream gets the
run's closing event from the store. Memory stays bounded whatever the rate of runs.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

from ...events import Ended, Event
from ...records import Run
from ...store.driver import Db
from .relay import EventRelay

RETAIN_RUNS = 1024
RETAIN_SECONDS = 300.0


def ended(run: Run, **at: float) -> Ended:
    """The event a run's end is told by (`timestamp=`: when it ended, for an end read from the store)."""
    return Ended(run.id, run.state.value, run.reply, run.error, run.error_code, run.session_id, **at)


@dataclass
class _Stream:
    events: list[Event] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    done: bool = False
    followers: int = 0


class EventHub:
    """The live events of runs (started, chunks, tool steps, the end), for the followers in this process; on a
    shared store (`db`), also those of runs another gateway runs that a follower here follows (`EventRelay`)."""

    def __init__(self, db: Db | None = None) -> None:
        self._streams: dict[str, _Stream] = {}
        self._finished: OrderedDict[str, float] = OrderedDict()  # run id -> when it ended, oldest first
        self._relay = EventRelay(db, self._relayed) if db is not None else None

    async def start(self) -> None:
        if self._relay is not None:
            await self._relay.start()

    async def stop(self) -> None:
        if self._relay is not None:
            await self._relay.stop()

    def _retire(self, run_id: str) -> None:
        """A finished run nobody follows: keep its buffer among the most recent few, drop the oldest."""
        now = time.monotonic()
        self._finished[run_id] = now
        while self._finished:
            oldest, ended = next(iter(self._finished.items()))
            if len(self._finished) <= RETAIN_RUNS and now - ended < RETAIN_SECONDS:
                break
            del self._finished[oldest]
            stream = self._streams.get(oldest)
            if stream is not None and not stream.followers:
                del self._streams[oldest]

    def publish(self, event: Event) -> None:
        if self._relay is not None:
            self._relay.sent(event)
        self._append(event)

    def _relayed(self, event: Event) -> None:
        """An event of a run another gateway runs: for the followers here only (never relayed on)."""
        if event.run_id in self._streams:
            self._append(event)

    def _append(self, event: Event) -> None:
        run_id = event.run_id
        stream = self._streams.get(run_id)
        if stream is None:
            if event.ends:
                return  # its buffer is gone: the store has the outcome
            stream = self._streams[run_id] = _Stream()
        if stream.done:
            return
        stream.events.append(event)
        if stream.followers:
            stream.changed.set()
            stream.changed = asyncio.Event()
        if event.ends:
            stream.done = True
            if not stream.followers:
                self._retire(run_id)

    def known(self, run_id: str) -> bool:
        return run_id in self._streams

    def reserve(self, run_id: str) -> None:
        """Keep a run's events for a follower that subscribes a moment later (call `follow(reserved=True)`)."""
        self._streams.setdefault(run_id, _Stream()).followers += 1

    async def follow(
        self, run_id: str, *, keepalive: float = 15.0, reserved: bool = False, elsewhere: bool = False
    ) -> AsyncGenerator[Event | None, None]:
        """Every event of the run, past and future, until its terminal one; None means 'still alive'. With
        `elsewhere` (the run is not run here), the gateway that runs it is asked for its events from now on."""
        stream = self._streams.setdefault(run_id, _Stream())
        if elsewhere and self._relay is not None:
            self._relay.want(run_id)
        if not reserved:
            stream.followers += 1
        index = 0
        try:
            while True:
                while index < len(stream.events):
                    yield stream.events[index]
                    index += 1
                if stream.done:
                    return
                try:
                    await asyncio.wait_for(stream.changed.wait(), timeout=keepalive)
                except TimeoutError:
                    yield None
        finally:
            stream.followers -= 1
            if stream.done and not stream.followers:
                self._retire(run_id)
            elif not stream.followers and not stream.events and self._streams.get(run_id) is stream:
                del self._streams[run_id]  # nothing kept for nobody: its first event makes it again
