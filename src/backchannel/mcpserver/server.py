"""The MCP server: Backchannel's six messaging tools (their own schemas), each call made as one session.

MCP hosts give up on a call after about 60 s, so a send waits at most `max_wait()` seconds (50; the
environment's BACKCHANNEL_MCP_MAX_WAIT_SECONDS lowers it) and then returns the receipt, never a failure:
the message goes on, its reply comes back to the session (wake on reply) and `check_message` reads it.
While a send waits, progress notifications go to a host that asked for them. Every result, an error's too
(an unknown tool or session, a gateway gone), carries `result` (backchannel.outcome).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext

from .. import __version__
from ..agent.tools.messaging import DEFAULT_WAIT
from ..agent.tools.messaging import TOOLS as MESSAGING
from ..errors import BackchannelError
from ..outcome import Outcome, error_body, of_error
from .asking import Asked, Asking
from .backends import Backend

log = logging.getLogger("backchannel.mcp")

MAX_WAIT_SECONDS = 50.0
MAX_WAIT_ENV = "BACKCHANNEL_MCP_MAX_WAIT_SECONDS"
PROGRESS_SECONDS = 5.0
SENDS = ("send_to_session", "send_to_peer")
TOOLS = {tool.name: tool.spec for tool in MESSAGING}
INSTRUCTIONS = (
    "Backchannel: message other AI agents' sessions and read their replies. A receipt means the message is "
    "accepted and queued: never resend it; its reply comes back later, read it with check_message."
)


SDK_DEFAULT_CLIENT = "mcp"  # the clientInfo name of the MCP SDK's own client when its host names none


def max_wait() -> float:
    """The longest a send waits before it returns a receipt (hosts time out around 60 s)."""
    raw = os.environ.get(MAX_WAIT_ENV)
    try:
        value = float(raw) if raw else MAX_WAIT_SECONDS
    except ValueError:
        value = MAX_WAIT_SECONDS
    return min(max(value, 0.0), MAX_WAIT_SECONDS)


@dataclass
class Caller:
    """Who a host connection acts as: a profile, and its session (given, or made on the first call)."""

    profile: str
    session_id: str | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    async def session(self, backend: Backend, client: str) -> str:
        async with self._lock:
            if self.session_id is None:
                title = session_title(client, time.strftime("%Y-%m-%d %H:%M"), uuid.uuid4().hex[:4])
                self.session_id = await backend.new_session(self.profile, title)
            return self.session_id


CallerOf = Callable[[ServerRequestContext[Any, Any]], Caller]


def build_server(backend: Backend, caller_of: CallerOf) -> Server[Any]:
    """An MCP server whose calls go to `backend` as the caller `caller_of` finds for each request."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(name) for name in TOOLS])

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        arguments = dict(params.arguments or {})
        if params.name not in TOOLS:
            known = ", ".join(TOOLS)
            failure = error_body(Outcome.REFUSED, "unknown_tool", f"no tool {params.name!r}; these are: {known}")
            return _result(failure, ok=False)
        wait = _cap_wait(arguments) if params.name in SENDS else 0.0
        try:
            caller = caller_of(ctx)
            session = await caller.session(backend, _client_name(ctx))
            if params.name == "send_to_session":
                asking = Asking(ctx, backend, caller.profile, session, Progress(ctx, wait, arguments).tick)
                if params.request_state is not None:  # a 2026-07-28 host's retry with its person's answer
                    result, ok = await asking.resume(params, max_wait())
                else:
                    call = backend.call(caller.profile, session, params.name, arguments, wait=wait)
                    result, ok = await asking.send(call, max_wait())
            else:
                call = backend.call(caller.profile, session, params.name, arguments, wait=wait)
                result, ok = await (_with_progress(ctx, call, wait, arguments) if wait > 0 else call)
        except Asked as asked:  # the host's person is asked through the result (2026-07-28)
            return asked.result
        except BackchannelError as exc:  # the gateway's refusal or failure (an unknown session …): the model reads it
            return _result(error_body(of_error(exc), exc.code, exc.message), ok=False)
        except Exception as exc:  # a bug of ours: logged for the operator; the host still gets a result
            log.exception("MCP call of %r failed", params.name)
            failure = error_body(
                Outcome.UNKNOWN,
                "internal_error",
                f"internal error ({type(exc).__name__}): a message may or may not have been sent; "
                "list_sessions and check_message tell",
            )
            return _result(failure, ok=False)
        return _result(result, ok=ok)

    return Server(
        "backchannel",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _tool(name: str) -> types.Tool:
    spec = TOOLS[name]
    description = spec.description
    if name in SENDS:
        description += f" Here a wait is at most {max_wait():g} s; then you get a receipt (the reply comes later)."
    return types.Tool(name=name, description=description, input_schema=spec.parameters)


def _cap_wait(arguments: dict[str, Any]) -> float:
    value = arguments.get("wait_seconds", DEFAULT_WAIT)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return 0.0  # the tool refuses it (invalid_arguments)
    arguments["wait_seconds"] = min(float(value), max_wait())
    return float(arguments["wait_seconds"])


class Progress:
    """Tells the host every few seconds that the reply is still awaited (`tick` as often as one likes)."""

    def __init__(self, ctx: ServerRequestContext[Any, Any], wait: float, arguments: dict[str, Any]) -> None:
        self.ctx, self.wait = ctx, wait
        self.target = arguments.get("session_id") or arguments.get("target") or "the target"
        self.started = self.told = time.monotonic()
        self.every = max(0.2, min(PROGRESS_SECONDS, wait / 5))

    async def tick(self) -> None:
        now = time.monotonic()
        if now - self.told < self.every:
            return
        self.told, elapsed = now, now - self.started
        total = max(self.wait, elapsed)
        with contextlib.suppress(Exception):  # a host that went away: the call goes on, its outcome is kept
            await self.ctx.session.report_progress(
                elapsed, total, f"waiting for the reply of {self.target} ({elapsed:.0f} s of {self.wait:g})"
            )


async def _with_progress(
    ctx: ServerRequestContext[Any, Any], call: Any, wait: float, arguments: dict[str, Any]
) -> tuple[dict[str, Any], bool]:
    """Run `call`, telling the host every few seconds that the reply is still awaited."""
    task: asyncio.Task[tuple[dict[str, Any], bool]] = asyncio.ensure_future(call)
    progress = Progress(ctx, wait, arguments)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=progress.every)
            if done:
                return task.result()
            await progress.tick()
    finally:
        if not task.done():
            task.cancel()


def _result(result: dict[str, Any], *, ok: bool) -> types.CallToolResult:
    text = json.dumps(result, ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=result, is_error=not ok
    )


def session_title(client: str, when: str, tag: str) -> str:
    """A host connection's session as a person reads it in a list: `MCP: Claude Desktop 2026-12-06 20:13 (c177)`,
    the client's name left out when it gave none (the tag keeps two in the same minute apart: titles are unique)."""
    return f"MCP: {client + ' ' if client else ''}{when} ({tag})"


def _client_name(ctx: ServerRequestContext[Any, Any]) -> str:
    """The name the host gave in its clientInfo, printable and on one line; "" for none (or the SDK's default,
    `mcp`, which names no host)."""
    params = ctx.session.client_params
    name = params.client_info.name if params is not None else ""
    name = " ".join("".join(c for c in name if c.isprintable()).split())[:40]
    return "" if name.lower() == SDK_DEFAULT_CLIENT else name
