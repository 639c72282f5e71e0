"""The turn of one claimed run: the profile's engine, the session's history, the framed message, the tools."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .. import keys
from ..agent.engines.cache import EngineCache
from ..agent.loop import TurnProgress, run_turn
from ..agent.tools.base import Sender, Tool, ToolContext
from ..framing import frame
from ..messages import Message
from ..store import sessions as sessionstore
from ..store.db import Database
from ..store.runs import RunRow
from .directory import Directory
from .events import EventHub

# Rewrites a run's message before its turn (the person's @mentions, answered first).
Prepare = Callable[[ToolContext, RunRow], Awaitable[str]]


class Turns:
    """Runs turns for the workers (the `TurnRunner` they are given); knows the agent, not the queue."""

    def __init__(
        self,
        *,
        db: Database,
        directory: Directory,
        engines: EngineCache,
        tools: Mapping[str, Tool],
        sender: Sender,
        hub: EventHub,
        prepare: Prepare | None = None,
    ) -> None:
        self.db = db
        self.directory = directory
        self.engines = engines
        self.tools = tools
        self.sender = sender
        self.hub = hub
        self.prepare = prepare

    async def run(self, run: RunRow, progress: TurnProgress) -> str:
        profile = self.directory.profile(run.profile)
        engine = self.engines.engine(profile)
        history = sessionstore.list_messages(self.db, run.session_id) if engine.uses_context else []
        ctx = ToolContext(
            profile=profile,
            session_id=run.session_id,
            run_id=run.id,
            hops=run.hops,
            chain=run.chain,
            exchange=run.origin or run.id,
            sender=self.sender,
        )
        text = await self.prepare(ctx, run) if self.prepare is not None else run.message
        via = "a reply to your message" if keys.is_wake(run.idempotency_key) else "send_to_session"
        incoming = Message(role="user", content=frame(run.sender, text, via=via))

        def emit(event: str, **data: Any) -> None:
            self.hub.publish(run.id, event, **data)

        return await run_turn(
            engine=engine,
            profile=profile,
            history=history,
            incoming=incoming,
            tools=self.tools,
            ctx=ctx,
            progress=progress,
            emit=emit,
        )
