"""The turn of one claimed run: the profile's engine, the session's history, the framed message, the tools."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping

from .. import deadlines, keys, tracing
from ..agent.engines.base import SessionLink
from ..agent.engines.cache import EngineCache
from ..agent.loop import TurnProgress, run_turn
from ..agent.memories import FileMemories, Memories
from ..agent.tools.base import Sender, Tool, ToolContext
from ..agent.tools.mcp import McpTools
from ..events import Started, Steered
from ..framing import frame, frame_answer, split_reply
from ..messages import Message
from ..records import Run
from ..store import questions as questionstore
from ..store import runs as runstore
from ..store import sessions as sessionstore
from ..store.driver import Db
from ..store.runs import Spent
from .delivery.directory import Directory
from .handoffs import ChatHandoffs
from .queue.events import EventHub
from .queue.steers import STEERABLE_ENGINES, SteerHints
from .turn_questions import RunPersonLine

# Rewrites a run's message before its turn (the person's @mentions, answered first).
Prepare = Callable[[ToolContext, Run], Awaitable[str]]


class Turns:
    """Runs turns for the workers (the `TurnRunner` they are given); knows the agent, not the queue.

    `live` holds the context of each turn in progress by session: a tool called from outside the turn
    runner (the Hermes plugin, on behalf of the Hermes agent computing that turn) acts in that turn."""

    def __init__(
        self,
        *,
        db: Db,
        directory: Directory,
        engines: EngineCache,
        tools: Mapping[str, Tool],
        sender: Sender,
        hub: EventHub,
        prepare: Prepare | None = None,
        mcp: McpTools | None = None,
        memories: Memories | None = None,
        steers: SteerHints | None = None,
        handoffs: ChatHandoffs | None = None,
    ) -> None:
        self.db = db
        self.directory = directory
        self.engines = engines
        self.tools = tools
        self.sender = sender
        self.hub = hub
        self.prepare = prepare
        self.mcp = mcp
        self.memories: Memories = memories or FileMemories()
        self.steers = steers
        self.handoffs = handoffs
        self.live: dict[str, tuple[ToolContext, SessionLink]] = {}

    async def _text(self, ctx: ToolContext, run: Run) -> str:
        return await self.prepare(ctx, run) if self.prepare is not None else run.message

    async def run(self, run: Run, progress: TurnProgress) -> str:
        profile = self.directory.profile(run.profile)
        engine = self.engines.engine(profile)
        tools = self.tools
        if self.mcp is not None and engine.offers_tools and profile.config.mcp_servers:
            tools = {**tools, **await self.mcp.tools(profile)}  # started on first use, kept running
        history = await sessionstore.list_messages(self.db, run.session_id) if engine.uses_context else []
        ctx = ToolContext(
            profile=profile,
            session_id=run.session_id,
            run_id=run.id,
            hops=run.hops,
            chain=run.chain,
            exchange=run.origin or run.id,
            sender=self.sender,
            memories=self.memories,
            trace=tracing.here(),  # the run's span (the workers make it current)
            deadline=run.deadline,
        )
        asked = await questionstore.last_of(self.db, run.id) if run.resumed_after is not None else None
        if asked is not None and not asked.is_open:  # its person's answer resumes it: the session's next message
            content = frame_answer(asked.id, asked.question, asked.state, asked.answer)
        elif keys.is_wake(run.idempotency_key):  # our own heading stays as it is; only the outcome is the other's
            heading, outcome = split_reply(await self._text(ctx, run))
            content = frame(run.sender, outcome, via="a reply to your message", heading=heading)
        else:
            content = frame(run.sender, await self._text(ctx, run))
        if run.deadline is not None:  # a line of our own: the turn knows when nobody waits for it any more
            content = f"{deadlines.frame_line(run.deadline, now=time.time())}\n{content}"
        incoming = Message(role="user", content=content)

        # Only an engine whose agent keeps the session elsewhere (hermes) reads the link's title and id.
        if not engine.keeps_session:
            link, known_remote = SessionLink(run.session_id), None
        else:
            row = await self.directory.session(run.session_id)
            link = SessionLink(row.id, row.title, row.remote_id, sender=run.sender, run_id=run.id)
            link.stopped, known_remote = (lambda: progress.stop_requested), row.remote_id
            link.person = RunPersonLine(self.db, run, link.stopped)
            if self.handoffs is not None:  # a Hermes session a person drives from a chat is reached through it
                link.chat = self.handoffs.path(
                    run_id=run.id, profile=profile.name, idle_seconds=profile.config.model.timeout_seconds
                )
        if run.attempts > 1 and engine.keeps_session:  # cut before: the far side may have the message
            kept = await sessionstore.list_messages(self.db, run.session_id)
            link.interrupted_copies = sum(m.role == "user" and m.content == incoming.content for m in kept)

        async def spent(progress: TurnProgress) -> None:  # before the step's tools: their sends weigh it
            await runstore.spend(self.db, run, Spent(*progress.unrecorded()))

        async def steered(progress: TurnProgress) -> list[Message]:  # messages sent with mode steer meanwhile
            if self.steers is None or not self.steers.take(run.session_id):
                return []
            joined = await runstore.take_steered(self.db, run)
            progress.steered.extend(r.id for r in joined)
            for r in joined:
                self.hub.publish(Started(r.id, run.session_id, steered_into=run.id))
                self.hub.publish(Steered(run.id, r.id))
            return [
                Message(role="user", content=frame(r.sender, r.message, via="a message steered into your turn"))
                for r in joined
            ]

        self.live[run.session_id] = (ctx, link)
        try:
            return await run_turn(
                engine=engine,
                profile=profile,
                history=history,
                incoming=incoming,
                tools=tools,
                ctx=ctx,
                progress=progress,
                emit=self.hub.publish,
                session=link,
                spent=spent,
                steered=steered if engine.name in STEERABLE_ENGINES else None,
            )
        finally:
            if self.live.get(run.session_id, (None,))[0] is ctx:
                del self.live[run.session_id]
            if link.remote_id is not None and link.remote_id != known_remote:
                await sessionstore.set_remote_id(self.db, link.id, link.remote_id)  # committed with the run's end
