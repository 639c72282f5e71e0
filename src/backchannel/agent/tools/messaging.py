"""The messaging tools: send_to_session, send_to_peer, check_message, cancel_message, list_sessions.

Refusals and bad addresses come back to the model as error results with their code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ...errors import BackchannelError
from ..engines.base import ToolSpec
from .base import Tool, ToolContext, ToolFailure, require_str

if TYPE_CHECKING:
    from ...core.delivery import Messenger, Origin

DEFAULT_WAIT = 120.0


def _wait(args: dict[str, Any]) -> float:
    value = args.get("wait_seconds", DEFAULT_WAIT)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ToolFailure("invalid_arguments", "wait_seconds must be a number of seconds, 0 or more")
    return float(value)


def build(messenger: Messenger) -> dict[str, Tool]:
    def handler(fn: Callable[[Origin, dict[str, Any]], Awaitable[Any]]) -> Any:
        async def run(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
            try:
                origin = messenger.origin(ctx.profile, ctx.session_id, ctx.run_id)
                result = await fn(origin, args)
            except BackchannelError as exc:
                if exc.exit_code != 2:  # not the model's doing: the operator's problem
                    raise
                raise ToolFailure(exc.code, exc.message) from exc
            return result if isinstance(result, dict) else {"sessions": result}

        return run

    async def send(origin: Origin, args: dict[str, Any]) -> dict[str, Any]:
        return await messenger.send(
            origin, require_str(args, "session_id"), require_str(args, "message"), wait=_wait(args)
        )

    async def send_peer(origin: Origin, args: dict[str, Any]) -> dict[str, Any]:
        return await messenger.send_peer(
            origin, require_str(args, "target"), require_str(args, "message"), wait=_wait(args)
        )

    async def check(origin: Origin, args: dict[str, Any]) -> dict[str, Any]:
        return messenger.check(origin, require_str(args, "run_id"))

    async def cancel(origin: Origin, args: dict[str, Any]) -> dict[str, Any]:
        return await messenger.cancel(origin, require_str(args, "run_id"))

    async def targets(origin: Origin, args: dict[str, Any]) -> list[dict[str, Any]]:
        return messenger.targets(origin, require_str(args, "profile", optional=True) or None)

    string = {"type": "string"}
    specs = [
        (
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
                        "session_id": {**string, "description": "address of the target session"},
                        "message": string,
                        "wait_seconds": {"type": "number", "default": DEFAULT_WAIT, "minimum": 0},
                    },
                    "required": ["session_id", "message"],
                },
            ),
            send,
        ),
        (
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
                        "target": {**string, "description": "peer or peer/profile"},
                        "message": string,
                        "wait_seconds": {"type": "number", "default": DEFAULT_WAIT, "minimum": 0},
                    },
                    "required": ["target", "message"],
                },
            ),
            send_peer,
        ),
        (
            ToolSpec(
                name="check_message",
                description="The state of a message you sent (by its run_id): queued, running, or its reply.",
                parameters={"type": "object", "properties": {"run_id": string}, "required": ["run_id"]},
            ),
            check,
        ),
        (
            ToolSpec(
                name="cancel_message",
                description="Cancel a message you sent that is still queued or being answered.",
                parameters={"type": "object", "properties": {"run_id": string}, "required": ["run_id"]},
            ),
            cancel,
        ),
        (
            ToolSpec(
                name="list_sessions",
                description="The sessions you are allowed to message, with titles and last activity.",
                parameters={"type": "object", "properties": {"profile": string}},
            ),
            targets,
        ),
    ]
    return {spec.name: Tool(spec=spec, handler=handler(fn)) for spec, fn in specs}
