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
_WAIT = {"type": "number", "default": DEFAULT_WAIT, "minimum": 0}

TOOLS: tuple[Tool, ...] = (
    Tool(
        ToolSpec(
            name="send_to_session",
            description=(
                "Send a message to another agent's session and get its reply. session_id takes an address: a "
                "profile name (its Bot Chat), profile/session-id, or a session id. The target answers in its own "
                "context. If it does not answer within wait_seconds you get a receipt: do not resend; the reply "
                "will arrive in this session. wait_seconds=0 sends without waiting."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "session_id": {**_STRING, "description": "address of the target session"},
                    "message": _STRING,
                    "wait_seconds": _WAIT,
                },
                "required": ["session_id", "message"],
            },
        ),
        _send,
    ),
    Tool(
        ToolSpec(
            name="send_to_peer",
            description=(
                "Send a message to an agent on another gateway and get its reply. target is peer (its default "
                "agent) or peer/profile; the message lands in that agent's Bot Chat. Past wait_seconds you get a "
                "receipt: do not resend; the reply will arrive in this session."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "target": {**_STRING, "description": "peer or peer/profile"},
                    "message": _STRING,
                    "wait_seconds": _WAIT,
                },
                "required": ["target", "message"],
            },
        ),
        _send_peer,
    ),
    Tool(
        ToolSpec(
            name="check_message",
            description="The state of a message you sent (by its run_id): queued, running, or its reply.",
            parameters={"type": "object", "properties": {"run_id": _STRING}, "required": ["run_id"]},
        ),
        _check,
    ),
    Tool(
        ToolSpec(
            name="cancel_message",
            description="Cancel a message you sent that is still queued or being answered.",
            parameters={"type": "object", "properties": {"run_id": _STRING}, "required": ["run_id"]},
        ),
        _cancel,
    ),
    Tool(
        ToolSpec(
            name="list_sessions",
            description="The sessions you are allowed to message, with titles and last activity.",
            parameters={"type": "object", "properties": {"profile": _STRING}},
        ),
        _targets,
    ),
)
