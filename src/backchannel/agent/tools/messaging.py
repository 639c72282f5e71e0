"""The messaging tools: send_to_session, send_to_peer, check_message, cancel_message, list_sessions.

send_to_peer with a `run_id` answers the question that peer's run asks this agent (its receipt said
`input_required` and the question): one optional argument rather than a tool of its own, since every model call
carries the schemas (a tool costs about 300 characters of them, this argument 69), and an answer is a message to
that peer; offered only to a profile that may message a peer (`offered`), so the others pay nothing for it.

Each goes through the turn's `Sender`; its result is the outcome (`backchannel.outcome.Result`) as JSON:
a reply, a receipt, or a refusal or failure with its code; `list_sessions` answers `delivered` with the list.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import Any

from ... import deadlines
from ...addresses import GROUP, REMOTE
from ...errors import UsageError
from ...outcome import Outcome, answered
from ..engines.base import ToolSpec
from .base import Tool, ToolContext, ToolFailure, require_str

DEFAULT_WAIT = 120.0


def _wait(args: dict[str, Any]) -> float:
    value = args.get("wait_seconds", DEFAULT_WAIT)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ToolFailure("invalid_arguments", "wait_seconds must be a number of seconds, 0 or more")
    return float(value)


def _deadline(args: dict[str, Any]) -> float | None:
    """The send's own deadline: seconds from now, or a duration or time (`10m`, `14:32`, RFC 3339); the turn's
    deadline bounds it whatever it says (`deadlines.inherited`)."""
    value = args.get("deadline")
    if value is None:
        return None
    now = time.time()
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return now + float(value)
    try:
        if not isinstance(value, str):
            raise UsageError("not a time")
        return deadlines.parse(value, now=now)
    except UsageError:
        raise ToolFailure(
            "invalid_arguments", f"deadline must be seconds from now or a time ({deadlines.EXAMPLES})"
        ) from None


def _told(result: dict[str, Any]) -> dict[str, Any]:
    """A result as the model reads it: a receipt says plainly that the answer is not here and who gives it; a
    peer's question, that this agent answers it."""
    if result.get("result") == Outcome.RECEIPT.value:
        result["note"] = QUESTION_NOTE if "question" in result and result["to"].startswith(REMOTE) else RECEIPT_NOTE
    return result


async def _send(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    address, message = require_str(args, "session_id"), require_str(args, "message")
    if address.strip().startswith(GROUP):  # every member, each as if sent alone: one outcome per member
        return (await ctx.messenger().send_group(ctx, address, message, wait=_wait(args))).to_dict()
    mode = args.get("mode", "queue")
    if mode not in ("queue", "steer"):
        raise ToolFailure("invalid_arguments", "mode must be queue or steer")
    sent = await ctx.messenger().send(
        ctx, address, message, wait=_wait(args), steer=mode == "steer", deadline=_deadline(args)
    )
    return _told(sent.to_dict())


async def _send_peer(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    target, message = require_str(args, "target"), require_str(args, "message")
    question_of = require_str(args, ANSWERS, optional=True)
    if question_of:  # the message answers the question that run of the peer's asks this agent
        return _told((await ctx.messenger().answer_peer(ctx, target, question_of, message)).to_dict())
    result = await ctx.messenger().send_peer(ctx, target, message, wait=_wait(args), deadline=_deadline(args))
    return _told(result.to_dict())


async def _idle(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return (await ctx.messenger().notify_when_idle(ctx, require_str(args, "session_id"))).to_dict()


async def _check(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return (await ctx.messenger().check(ctx, require_str(args, "run_id"))).to_dict()


async def _cancel(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return (await ctx.messenger().cancel(ctx, require_str(args, "run_id"))).to_dict()


async def _targets(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    profile = require_str(args, "profile", optional=True) or None
    return answered({"sessions": await ctx.messenger().targets(ctx, profile)})


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


# Every parameter says what it takes (hosts show it), in as few words as a model needs: each token of these
# schemas is in every model call (tests/test_prompt_size.py and the llama interop test pin their size).
_MESSAGE = _string("the text")
_WAIT = {"type": "number", "default": DEFAULT_WAIT, "description": "0: no wait"}  # below 0 is refused by _wait
_RUN_ID = _string("from the send")
_MODE = "steer: into its running turn"
_DEADLINE = {"type": ["number", "string"], "description": "seconds from now, or a time; it answers by then"}


# What a receipt tells the model that sent the message (a small model otherwise answers in the other's place).
RECEIPT_NOTE = (
    "Not answered yet. Its answer will come into this session later, as a message of its own: do not answer in"
    " the other agent's place; tell your user the message was sent and that the answer will follow."
)
# What a peer's agent asking back in its turn tells the model that sent the message (`question` in the result).
QUESTION_NOTE = (
    "Not answered yet: the other agent asks you the question above. Answer it with send_to_peer: the same target,"
    " your answer as the message, and this run_id. Its reply then comes into this session later."
)
# Arguments a profile opts into (`agent.session_messaging.send_options`): offered to its models only then, since a
# small model offered them misuses them (a wait of 0, a steer, then an answer of its own making).
SEND_OPTIONS = ("wait_seconds", "mode", "deadline")
ANSWERS = "run_id"  # send_to_peer's: the peer's run whose question the message answers


def offered(spec: ToolSpec, options: Collection[str], *, peers: bool = True) -> ToolSpec:
    """A tool's schema as a profile's models are offered it: without the send options it has not opted into, nor
    send_to_peer's `run_id` unless it may message a peer (`peers`): no peer's agent can have asked it anything."""
    properties = spec.parameters.get("properties", {})
    dropped = [name for name in SEND_OPTIONS if name in properties and name not in options]
    if spec.name == "send_to_peer" and not peers:
        dropped.append(ANSWERS)
    if not dropped:
        return spec
    kept = {name: value for name, value in properties.items() if name not in dropped}
    return ToolSpec(spec.name, spec.description, {**spec.parameters, "properties": kept})


# The schemas a turn's tools are offered with, by the tools and the profile's options: the same every turn.
_OFFERED: dict[tuple[tuple[int, ...], tuple[str, ...], bool], tuple[tuple[ToolSpec, ...], tuple[ToolSpec, ...]]] = {}


def offered_all(specs: Sequence[ToolSpec], options: Collection[str], *, peers: bool) -> tuple[ToolSpec, ...]:
    """`offered` for each of a turn's tools, made once for the same tools (the very objects) and options."""
    key = (tuple(map(id, specs)), tuple(options), peers)
    kept = _OFFERED.get(key)
    if kept is not None and all(a is b for a, b in zip(kept[0], specs, strict=True)):
        return kept[1]
    if len(_OFFERED) >= 64:  # profiles' MCP tools come and go: the few current sets stay
        _OFFERED.clear()
    made = tuple(offered(spec, options, peers=peers) for spec in specs)
    _OFFERED[key] = (tuple(specs), made)
    return made


def _spec(name: str, description: str, required: dict[str, Any], optional: dict[str, Any] | None = None) -> ToolSpec:
    properties = {**required, **(optional or {})}
    return ToolSpec(name, description, {"type": "object", "properties": properties, "required": list(required)})


TOOLS: tuple[Tool, ...] = (
    Tool(
        _spec(
            "send_to_session",
            "Message another agent's session and get its reply, or a receipt when it answers later (do not"
            " resend: the reply comes here).",
            {"session_id": _string("profile, profile/session-id, session id or group:NAME"), "message": _MESSAGE},
            {
                "wait_seconds": _WAIT,
                "mode": {"type": "string", "enum": ["queue", "steer"], "description": _MODE},
                "deadline": _DEADLINE,
            },
        ),
        _send,
    ),
    Tool(
        _spec(
            "send_to_peer",
            "The same, to an agent on another gateway.",
            {"target": _string("peer or peer/profile"), "message": _MESSAGE},
            {"wait_seconds": _WAIT, "deadline": _DEADLINE, ANSWERS: _string("answers its question")},
        ),
        _send_peer,
    ),
    Tool(_spec("check_message", "State or reply of a message you sent.", {"run_id": _RUN_ID}), _check),
    Tool(
        _spec(
            "notify_when_idle",
            "A note here once that session has nothing queued or running.",
            {"session_id": _string("as above")},
        ),
        _idle,
    ),
    Tool(_spec("cancel_message", "Cancel an unanswered message you sent.", {"run_id": _RUN_ID}), _cancel),
    Tool(
        _spec("list_sessions", "The sessions you may message.", {}, {"profile": _string("only this profile's")}),
        _targets,
    ),
)
