"""A run's events between the gateways of a shared store, as they happen.

A gateway whose follower (a stream, the web view, a CLI watching a run) follows a run it does not run asks the
others for its events (`want`); the gateway that runs it then sends each event of that run as it is published
(`sent`), in order, until the run ends. Notices are fire-and-forget: the store stays the truth (a follower sees a
run's end from the store whatever came through here), so a notice lost costs a follower some of the live text,
never the outcome. On a home of its own nothing is relayed (`Db.tell` and `Db.hear` do nothing there).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable

from ...errors import StoreError
from ...events import Event, event_of
from ...store.driver import Db

FOLLOW_CHANNEL = "backchannel_follow"  # payload: a run id some gateway follows
EVENTS_CHANNEL = "backchannel_events"  # payload: one event of a run, as JSON
WANTED_SECONDS = 600.0  # a run asked for is relayed this long at most (its end stops it sooner)
MAX_PAYLOAD = 7000  # bytes of a notice (PostgreSQL takes under 8000): a longer delta is sent in pieces
log = logging.getLogger("backchannel.queue")

Deliver = Callable[[Event], None]  # a run's event relayed from another gateway, for the followers here


class EventRelay:
    """The events of runs followed on one gateway and run on another, through the shared store's notices."""

    def __init__(self, db: Db, deliver: Deliver) -> None:
        self.db = db
        self._deliver = deliver
        self._wanted: dict[str, float] = {}  # run id -> until when another gateway follows it
        self._out: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.db.hear(FOLLOW_CHANNEL, self._asked)
        await self.db.hear(EVENTS_CHANNEL, self._heard)
        self._task = asyncio.create_task(self._send())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def want(self, run_id: str) -> None:
        """A follower here follows `run_id`, which another gateway may be running: ask for its events."""
        if self._task is not None:
            self._out.put_nowait((FOLLOW_CHANNEL, run_id))

    def sent(self, event: Event) -> None:
        """An event of a run published here: to the gateways that asked for it, in the order published."""
        until = self._wanted.get(event.run_id)
        if until is None:
            return
        if until < time.monotonic() or event.ends:
            del self._wanted[event.run_id]
            if until < time.monotonic():
                return
        for piece in _pieces(event.to_dict()):
            self._out.put_nowait((EVENTS_CHANNEL, piece))

    def _asked(self, run_id: str) -> None:
        self._wanted[run_id] = time.monotonic() + WANTED_SECONDS

    def _heard(self, payload: str) -> None:
        try:
            said = json.loads(payload)
        except ValueError:
            said = None
        if not isinstance(said, dict) or not said.get("run_id"):
            log.debug("a relayed event that is not one: %.200s", payload)
            return
        self._deliver(event_of(said))

    async def _send(self) -> None:
        while True:
            channel, payload = await self._out.get()
            try:
                await self.db.tell(channel, payload)
            except StoreError as exc:  # the store is away: a follower elsewhere still gets the end from it
                log.debug("run event not relayed: %s", exc.message)


def _pieces(event: dict[str, object]) -> list[str]:
    """The event as notices under MAX_PAYLOAD bytes each: a long delta split into several deltas."""
    whole = json.dumps(event, ensure_ascii=False)
    if len(whole.encode()) <= MAX_PAYLOAD:
        return [whole]
    delta = event.get("delta")
    if not isinstance(delta, str):
        return []  # no event but a delta is this long; such an event stays on the gateway that ran it
    step = MAX_PAYLOAD // 4  # characters: at most 4 bytes each in UTF-8
    return [json.dumps({**event, "delta": delta[i : i + step]}, ensure_ascii=False) for i in range(0, len(delta), step)]
