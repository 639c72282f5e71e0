"""Live run events for streams: a buffer per run that late subscribers replay, then follow."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

TERMINAL_EVENTS = frozenset({"run.completed", "run.failed", "run.cancelled", "run.expired"})
RETAIN_SECONDS = 300.0  # a finished run's events stay readable this long


@dataclass
class _Stream:
    events: list[dict[str, Any]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    done: bool = False


class EventHub:
    def __init__(self) -> None:
        self._streams: dict[str, _Stream] = {}

    def publish(self, run_id: str, event: str, **data: Any) -> None:
        stream = self._streams.setdefault(run_id, _Stream())
        if stream.done:
            return
        stream.events.append({"event": event, "run_id": run_id, "timestamp": time.time(), **data})
        stream.changed.set()
        stream.changed = asyncio.Event()
        if event in TERMINAL_EVENTS:
            stream.done = True
            asyncio.get_running_loop().call_later(RETAIN_SECONDS, self._streams.pop, run_id, None)

    def known(self, run_id: str) -> bool:
        return run_id in self._streams

    async def follow(self, run_id: str, *, keepalive: float = 15.0) -> AsyncIterator[dict[str, Any] | None]:
        """Every event of the run, past and future, until its terminal one; None means 'still alive'."""
        stream = self._streams.setdefault(run_id, _Stream())
        index = 0
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
