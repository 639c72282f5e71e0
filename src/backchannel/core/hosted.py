"""Messaging tools called from outside the turn runner (the Hermes plugin, MCP hosts), as the session they come from.

The Hermes agent computing a turn of a hermes profile calls `send_to_session` in its own process; the plugin
hands the call here with the Hermes session id and where the call comes from (`CallOrigin`). A call is bound
to a Backchannel run only when it comes from that run's own turn: the turn Backchannel asked of Hermes's API
server carries the session's tag (`turn_tag`, Hermes's X-Hermes-Session-Key) or, asked as a Hermes run, that
run's id (Hermes's session key for a run's tools), and a turn handed to Hermes's chat pipeline is named by its
run. Then the run's hop, chain, exchange and count of identical sends apply
exactly as for a native agent. Any other call (the person's own chat turn, another client of Hermes, an MCP
host) is hop 1 of a new exchange from that session, whatever Backchannel turn runs beside it. A plugin of an
earlier version, which says nothing of where a call comes from, is bound to the turn running in the session.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import tracing
from ..agent.engines.base import SessionLink
from ..agent.engines.hermes import turn_tag
from ..agent.tools.base import Sender, Tool, ToolContext, call_tool
from ..errors import NotFound
from ..records import Session
from ..store import sessions as sessionstore
from ..store.driver import Db
from .delivery.directory import Directory
from .delivery.imports import Imports
from .delivery.mentions import Mentions
from .queue.commits import commits
from .turns import Turns

HOSTED_TOOLS = (
    "send_to_session",
    "send_to_peer",
    "check_message",
    "notify_when_idle",
    "cancel_message",
    "list_sessions",
)


@dataclass(frozen=True)
class CallOrigin:
    """Where a hosted call comes from, as its host says: the run whose handed-over turn makes it (`run_id`), the
    tag of the turn Backchannel asked of Hermes (`tag`), and the surface that drives the turn (`weixin`,
    `api_server`, `mcp` …)."""

    run_id: str | None = None
    tag: str | None = None
    surface: str | None = None


@dataclass(frozen=True)
class HostedCall:
    """A tool's result (JSON text, as a model reads it), the session it acted as and the run it came from."""

    tool: str
    session: Session
    run_id: str | None
    result: str
    ok: bool


class HostedTools:
    """The messaging tools for agents that run elsewhere, acting as one of a profile's sessions."""

    def __init__(
        self,
        *,
        db: Db,
        directory: Directory,
        turns: Turns,
        imports: Imports,
        tools: Mapping[str, Tool],
        sender: Sender,
        mentions: Mentions,
    ) -> None:
        self.db = db
        self.mentions_of = mentions
        self.directory = directory
        self.turns = turns
        self.imports = imports
        self.tools = {name: tools[name] for name in HOSTED_TOOLS}
        self.sender = sender

    @commits
    async def call(
        self, profile_name: str, session_id: str, tool: str, arguments: dict[str, Any], origin: CallOrigin | None
    ) -> HostedCall:
        """Run `tool` as session `session_id` of `profile_name` (its id here or its Hermes id), from `origin`
        (None: a host that does not say; the turn running in the session, if any)."""
        self.directory.check_profile(profile_name)
        if tool not in self.tools:
            raise NotFound(f"no tool {tool!r} here; these are: {', '.join(HOSTED_TOOLS)}", code="unknown_tool")
        session, ctx, run_id = await self._context(profile_name, session_id, origin)
        # A call made on behalf of a turn running here is a step of that turn's span; any other, of the request's.
        parent = ctx.trace if run_id is not None else None
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
        with tracing.span(f"execute_tool {tool}", "internal", attributes, parent=parent):
            result, ok = await call_tool(self.tools, tool, arguments, ctx)
        return HostedCall(tool, session, run_id, result, ok)

    @commits
    async def mentions(self, profile_name: str, session_id: str, text: str, *, wait: float) -> tuple[Session, str, int]:
        """A person's `text` typed in session `session_id` (a Hermes platform chat) with its `@session:` and
        `@peer:` mentions answered as from that session, as Backchannel's own mentions are; how many it had."""
        session, ctx, _ = await self._context(profile_name, session_id, CallOrigin(surface="chat"))
        rewritten, count = await self.mentions_of.answer(ctx, text, wait=wait)
        return session, rewritten, count

    async def _context(
        self, profile_name: str, session_id: str, origin: CallOrigin | None
    ) -> tuple[Session, ToolContext, str | None]:
        profile = self.directory.profile(self.directory.check_profile(profile_name))
        session = await self._caller(profile.name, session_id, hermes=profile.config.model.engine == "hermes")
        live = self.turns.live.get(session.id)
        if live is not None and _from_turn(origin, live[0], live[1], profile.name, session.id):
            return session, live[0], live[0].run_id
        ctx = ToolContext(
            profile=profile,
            session_id=session.id,
            run_id=f"hosted_{uuid.uuid4().hex}",  # no run: each call is its own send
            sender=self.sender,
            memories=self.turns.memories,
        )
        ctx.exchange = ctx.run_id
        return session, ctx, None

    async def _caller(self, profile: str, session_id: str, *, hermes: bool) -> Session:
        found = await sessionstore.find_by_remote_id(self.db, profile, session_id)
        if found is not None:
            return found
        for ctx, link in self.turns.live.values():  # a tip Hermes moved to during the turn
            if ctx.profile.name == profile and link.remote_id == session_id:
                return await self.directory.session(link.id)
        if not hermes:
            raise NotFound(f"no session {session_id!r} in profile {profile!r}", code="session_not_found")
        return await self.imports.adopt(profile, session_id)  # a Hermes session that never had a turn here


def _from_turn(origin: CallOrigin | None, turn: ToolContext, link: SessionLink, profile: str, session_id: str) -> bool:
    """Whether a call comes from `turn`, the one running in its session: named by its run, tagged as a turn
    Backchannel asked of that session, or made in the Hermes run that turn is over there (Hermes gives a run's tools
    the run's id as their session key); a host that says nothing (an earlier plugin) is taken at its session."""
    if origin is None:
        return True
    if origin.run_id == turn.run_id or origin.tag == turn_tag(profile, session_id):
        return True
    return origin.tag is not None and origin.tag == link.remote_run
