"""Live run events for streams: a buffer per run that late subscribers replay, then follow.

Finished runs keep their buffer for a while (the last RETAIN_RUNS of them, RETAIN_SECONDS at most),
so a stream opened just after a quick run still sees all its events; later, the stream gets the
run's closing event from the store. Memory stays bounded whatever the rate of runs.

The typed progress of one run (`Progress`) is what a watcher of it reads (`Delivery.watch`): behind how
many runs it waits, its start, its text and tool steps as they come, a hold, the end of the wait, its end.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from ...outcome import Result

TERMINAL_EVENTS = frozenset({"run.completed", "run.failed", "run.cancelled", "run.expired", "run.denied"})
RETAIN_RUNS = 1024
RETAIN_SECONDS = 300.0


@dataclass(frozen=True)
class Queued:
    """The run waits in its session's queue behind `ahead` runs (the running one too); again when that changes."""

    ahead: int


@dataclass(frozen=True)
class Held:
    """The run waits for the person's approval (a hold rule)."""


@dataclass(frozen=True)
class Started:
    """The run's turn began."""


@dataclass(frozen=True)
class Chunk:
    """Text of the reply as the engine writes it."""

    text: str


@dataclass(frozen=True)
class Step:
    """A tool step of the turn: `event` is `tool.started` or `tool.completed`."""

    event: str
    tool: str
    preview: Any = None
    error: Any = None


@dataclass(frozen=True)
class WaitOver:
    """The watcher's wait ran out with the run not ended: `result` is its outcome so far."""

    result: Result


@dataclass(frozen=True)
class Ended:
    """The run's end: its state, reply, error and code as its closing event says, and its outcome."""

    state: str
    output: str | None
    error: str | None
    code: str | None
    result: Result


Progress = Queued | Held | Started | Chunk | Step | WaitOver | Ended


@dataclass
class _Stream:
    events: list[dict[str, Any]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    done: bool = False
    followers: int = 0


class EventHub:
    def __init__(self) -> None:
        self._streams: dict[str, _Stream] = {}
        self._finished: OrderedDict[str, float] = OrderedDict()  # run id -> when it ended, oldest first

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

    def publish(self, run_id: str, event: str, **data: Any) -> None:
        stream = self._streams.get(run_id)
        if stream is None:
            if event in TERMINAL_EVENTS:
                return  # its buffer is gone: the store has the outcome
            stream = self._streams[run_id] = _Stream()
        if stream.done:
            return
        stream.events.append({"event": event, "run_id": run_id, "timestamp": time.time(), **data})
        if stream.followers:
            stream.changed.set()
            stream.changed = asyncio.Event()
        if event in TERMINAL_EVENTS:
            stream.done = True
            if not stream.followers:
                self._retire(run_id)

    def known(self, run_id: str) -> bool:
        return run_id in self._streams

    def reserve(self, run_id: str) -> None:
        """Keep a run's events for a follower that subscribes a moment later (call `follow(reserved=True)`)."""
        self._streams.setdefault(run_id, _Stream()).followers += 1

    async def follow(
        self, run_id: str, *, keepalive: float = 15.0, reserved: bool = False
    ) -> AsyncIterator[dict[str, Any] | None]:
        """Every event of the run, past and future, until its terminal one; None means 'still alive'."""
        stream = self._streams.setdefault(run_id, _Stream())
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
