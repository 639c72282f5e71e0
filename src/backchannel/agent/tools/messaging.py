"""The messaging tools: send_to_session, send_to_peer, check_message, cancel_message, list_sessions.

Each goes through the turn's `Sender`; its result is the outcome (`backchannel.outcome.Result`) as JSON:
a reply, a receipt, or a refusal or failure with its code.
"""

from __future__ import annotations

from typing import Any

from ..engines.base import ToolSpec
from .base import Tool, ToolContext, ToolFailure, require_str

DEFAULT_WAIT = 120.0


def _wait(args: dict[str, Any]) -> float:
    value = args.get("wait_seconds", DEFAULT_WAIT)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ToolFailure("invalid_arguments", "wait_seconds must be a number of seconds, 0 or more")
    return float(value)


async def _send(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    result = await ctx.messenger().send(
        ctx, require_str(args, "session_id"), require_str(args, "message"), wait=_wait(args)
    )
    return result.to_dict()


async def _send_peer(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    result = await ctx.messenger().send_peer(
        ctx, require_str(args, "target"), require_str(args, "message"), wait=_wait(args)
    )
    return result.to_dict()


async def _check(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return (await ctx.messenger().check(ctx, require_str(args, "run_id"))).to_dict()


async def _cancel(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return (await ctx.messenger().cancel(ctx, require_str(args, "run_id"))).to_dict()


async def _targets(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return {"sessions": ctx.messenger().targets(ctx, require_str(args, "profile", optional=True) or None)}


_STRING = {"type": "string"}
_WAIT = {"type": "number", "default": DEFAULT_WAIT}  # below 0 is refused by _wait


def _spec(name: str, description: str, required: dict[str, Any], optional: dict[str, Any] | None = None) -> ToolSpec:
    properties = {**required, **(optional or {})}
    return ToolSpec(name, description, {"type": "object", "properties": properties, "required": list(required)})


TOOLS: tuple[Tool, ...] = (
    Tool(
        _spec(
            "send_to_session",
            "Message another agent's session and get its reply. session_id: a profile (its Bot Chat), "
            "profile/session-id or a session id. Past wait_seconds you get a receipt: do not resend, the reply "
            "comes to this session. wait_seconds=0: do not wait.",
            {"session_id": _STRING, "message": _STRING},
            {"wait_seconds": _WAIT},
        ),
        _send,
    ),
    Tool(
        _spec(
            "send_to_peer",
            "The same for an agent on another gateway: target is peer or peer/profile.",
            {"target": _STRING, "message": _STRING},
            {"wait_seconds": _WAIT},
        ),
        _send_peer,
    ),
    Tool(_spec("check_message", "State or reply of a message you sent.", {"run_id": _STRING}), _check),
    Tool(_spec("cancel_message", "Cancel a message you sent that is not answered yet.", {"run_id": _STRING}), _cancel),
    Tool(_spec("list_sessions", "The sessions you may message.", {}, {"profile": _STRING}), _targets),
)
