"""Turns that go into a Hermes session through that gateway's own chat pipeline: handed to the Backchannel plugin
there, run by Hermes after whatever the person's chat is running, their replies handed back.

A Hermes session that a person drives from a chat platform (weixin, Telegram …) has one writer, Hermes's own
gateway: its chat adapter runs one turn at a time per chat, and Hermes 0.19's API server does not take that
lease (a turn asked of it runs beside the person's, and each model call reads the other's message). So a
hermes-engine turn for such a session is handed over (`ChatHandoffs.path(...).deliver`): the plugin, which asks
this gateway for its profile's work (`take`, a long poll), gives the message to the chat as an internal event
(Hermes queues it behind the person's turn, as it does its own background results), and settles the handoff
with the turn's reply, which Hermes has also sent to the person's chat. The engine waits for it while the
plugin is there and says where it stands; a plugin that stops asking for work gives back what it held. A stopped
run withdraws its handoff unless the plugin has begun handing it in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from ..errors import EngineError, HermesPluginAbsent
from ..store import handoffs as store
from ..store.driver import Db
from ..store.handoffs import SETTLED, Handoff, State

__all__ = ["REPORTED", "ChatHandoffs", "ChatPath", "Handoff", "State"]

log = logging.getLogger("backchannel.handoffs")
PRESENT_SECONDS = 60.0  # a plugin that asked for work within this long is there (it asks at least every 15 s)
POLL_SECONDS = 0.25  # how often a wait looks at the store (a handoff settled through another gateway)
TAKE_WAIT_MAX = 15.0  # the longest a plugin's ask for work is held open
# What a plugin may say of a handoff: where it stands, or how it was settled (never `withdrawn`, its run's word).
REPORTED: frozenset[str] = frozenset({"waiting", "running", *SETTLED} - {"withdrawn"})
PRUNE_SECONDS = 3600.0  # how often settled handoffs past store.handoffs.KEEP_SECONDS are removed


class ChatHandoffs:
    """The handoffs of one store: offered by turns here, taken and settled by the plugins of Hermes gateways."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self._offered = asyncio.Event()  # a handoff was offered in this process: takers look now
        self._settled: dict[str, asyncio.Event] = {}  # run id -> set when its handoff changes in this process
        self._pruned = -PRUNE_SECONDS  # when settled handoffs were last removed (as a plugin asks for work)

    def path(self, *, run_id: str, profile: str, idle_seconds: float) -> ChatPath:
        """The way a turn of run `run_id` (of hermes profile `profile`) reaches a chat-driven Hermes session."""
        return ChatPath(self, run_id=run_id, profile=profile, idle_seconds=idle_seconds)

    # --- the plugin's side -----------------------------------------------------------------------------

    async def take(self, profile: str, *, taker: str, wait: float) -> list[Handoff]:
        """The profile's offered handoffs, taken by `taker`, and those it already holds (a plugin asking again
        after a restart of its own finds them); waits up to `wait` seconds for one."""
        deadline = time.monotonic() + min(max(wait, 0.0), TAKE_WAIT_MAX)
        if time.monotonic() - self._pruned > PRUNE_SECONDS:
            self._pruned = time.monotonic()
            await store.prune(self.db, before=time.time() - store.KEEP_SECONDS)
        while True:
            await store.seen(self.db, profile, taker)
            await store.release_stale(self.db, before=time.time() - PRESENT_SECONDS)
            found = [*await store.held_by(self.db, profile, taker), *await store.take(self.db, profile, taker=taker)]
            remaining = deadline - time.monotonic()
            if found or remaining <= 0:
                return found
            self._offered.clear()
            with contextlib.suppress(TimeoutError):  # another gateway's offer is seen in the store on the next look
                await asyncio.wait_for(self._offered.wait(), timeout=min(remaining, 1.0))

    async def settle(
        self,
        profile: str,
        run_id: str,
        state: State,
        *,
        reply: str | None = None,
        error: str | None = None,
        detail: str | None = None,
    ) -> Handoff | None:
        """What the plugin says of a handoff; None when the profile has no such handoff."""
        found = await store.settle(
            self.db, run_id, profile=profile, state=state, reply=reply, error=error, detail=detail
        )
        event = self._settled.get(run_id)
        if event is not None:
            event.set()
        return found

    async def get(self, profile: str, run_id: str) -> Handoff | None:
        """The profile's handoff of that run, if it has one."""
        found = await store.get(self.db, run_id)
        return found if found is not None and found.profile == profile else None

    # --- the turn's side -------------------------------------------------------------------------------

    async def present(self, profile: str) -> bool:
        seen = await store.last_seen(self.db, profile)
        return seen is not None and seen >= time.time() - PRESENT_SECONDS

    async def offer(self, *, run_id: str, profile: str, remote_session: str, message: str) -> Handoff:
        handoff = await store.offer(
            self.db, run_id=run_id, profile=profile, remote_session=remote_session, message=message
        )
        await self.db.durable()  # offered only once it is on disk: the plugin may take it at once
        self._offered.set()
        return handoff

    async def settled(self, run_id: str, *, idle_seconds: float) -> Handoff:
        """The run's handoff once settled. Each word from the plugin (waiting, running) counts as progress; no word
        for `idle_seconds` while its plugin is away fails the turn."""
        event = self._settled.setdefault(run_id, asyncio.Event())
        try:
            while True:
                handoff = await store.get(self.db, run_id)
                if handoff is None:
                    raise EngineError(f"run {run_id!r}: its handoff to the Hermes plugin is gone from the store")
                if handoff.settled:
                    return handoff
                quiet = time.time() - handoff.updated_at
                if quiet > idle_seconds and not await self.present(handoff.profile):
                    raise EngineError(
                        f"the Backchannel plugin of the Hermes gateway serving profile {handoff.profile!r} has not"
                        f" asked for work for {quiet:.0f}s, holding this turn ({handoff.state}); is that Hermes"
                        " gateway running?"
                    )
                event.clear()
                with contextlib.suppress(TimeoutError):  # settled through another gateway: seen in the store
                    await asyncio.wait_for(event.wait(), timeout=POLL_SECONDS)
        finally:
            self._settled.pop(run_id, None)


@dataclass
class ChatPath:
    """One run's way into a chat-driven Hermes session (the engine's `ChatPath`): hand the message over, await
    the reply."""

    handoffs: ChatHandoffs
    run_id: str
    profile: str
    idle_seconds: float

    async def deliver(self, remote_session: str, message: str) -> str | None:
        """The reply of the turn Hermes ran for the message in its chat; None when no chat drives that session
        there (the plugin found no chat adapter for it): the engine reaches it through the API server.

        The run's handoff is made once: a turn run again after a crash finds it (answered, or still with the
        plugin) and never hands the message over twice. Nothing is handed over while no plugin asks for the
        profile's work (HermesPluginAbsent)."""
        known = await store.get(self.handoffs.db, self.run_id)
        if known is None:
            if not await self.handoffs.present(self.profile):
                raise HermesPluginAbsent(
                    f"Hermes session {remote_session!r} is driven from a chat platform, and Backchannel reaches such"
                    " a session through its plugin in that Hermes gateway, which has not asked this gateway for"
                    f" work: enable it there (backchannel hermes connect {self.profile} --hermes-home DIR) and"
                    " restart that Hermes gateway"
                )
            await self.handoffs.offer(
                run_id=self.run_id, profile=self.profile, remote_session=remote_session, message=message
            )
        done = await self.handoffs.settled(self.run_id, idle_seconds=self.idle_seconds)
        if done.state == "answered":
            return done.reply or ""
        if done.state == "not_a_chat":
            return None
        raise EngineError(
            f"the Hermes gateway's chat pipeline did not run this turn in session {remote_session!r}: "
            f"{done.error or 'no reason given'}"
        )

    async def withdraw(self) -> bool:
        """Take the run's handoff back (its run was stopped) unless the plugin has begun handing it to Hermes;
        whether it was taken back. One handed in runs there, and its reply still reaches the person's chat."""
        withdrawn = await store.withdraw(self.handoffs.db, self.run_id)
        if withdrawn:
            await self.handoffs.db.durable()
        return withdrawn
