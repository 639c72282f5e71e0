"""The messaging tools: send_to_session, send_to_peer, check_message, cancel_message, list_sessions.

Each goes through the turn's `Sender`; its result is the outcome (`backchannel.outcome.Result`) as JSON:
a reply, a receipt, or a refusal or failure with its code; `list_sessions` answers `delivered` with the list.
"""

from __future__ import annotations

from typing import Any

from ...outcome import answered
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
    return answered({"sessions": ctx.messenger().targets(ctx, require_str(args, "profile", optional=True) or None)})


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


# Every parameter says what it takes: hosts show these to their person, and models read them.
_MESSAGE = _string(
    "The text to send. The other agent reads it as a message from this session (another agent), "
    "never as its own person's words."
)
_WAIT = {  # below 0 is refused by _wait
    "type": "number",
    "default": DEFAULT_WAIT,
    "description": (
        f"Seconds to wait for the reply (default {DEFAULT_WAIT:g}). Past it you get a receipt instead: the message "
        "is accepted, do not resend it; the reply comes to this session later. 0: return the receipt at once."
    ),
}
_RUN_ID = "The run id (run_…) a send gave you, in its receipt or its result"


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
            {
                "session_id": _string(
                    "Whom to message, on this gateway: a profile name (its Bot Chat), profile/session-id, "
                    "or a session id alone (like 20261130_015530_55cf9b)."
                ),
                "message": _MESSAGE,
            },
            {"wait_seconds": _WAIT},
        ),
        _send,
    ),
    Tool(
        _spec(
            "send_to_peer",
            "The same for an agent on another gateway: target is peer or peer/profile.",
            {
                "target": _string(
                    "The agent on another gateway: the peer's name (its default profile) or peer/profile; "
                    "the peers are the ones this gateway knows."
                ),
                "message": _MESSAGE,
            },
            {"wait_seconds": _WAIT},
        ),
        _send_peer,
    ),
    Tool(
        _spec(
            "check_message",
            "State or reply of a message you sent.",
            {"run_id": _string(f"{_RUN_ID}: the message to look up.")},
        ),
        _check,
    ),
    Tool(
        _spec(
            "cancel_message",
            "Cancel a message you sent that is not answered yet.",
            {"run_id": _string(f"{_RUN_ID}: the message to cancel.")},
        ),
        _cancel,
    ),
    Tool(
        _spec(
            "list_sessions",
            "The sessions you may message.",
            {},
            {"profile": _string("Only this profile's sessions (default: those of every profile you may message).")},
        ),
        _targets,
    ),
)
