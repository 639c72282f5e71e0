"""Tools offered to an agent: a spec for the model, a handler, and what a handler may use.

A handler gets the `ToolContext` of the turn calling it (who is calling, and the `Sender` through which
it may message others) and returns a JSON-able dict with its `result` (backchannel.outcome: a message's
outcome, or `answered` for any other answer). An error the model caused (a `ToolFailure`, a bad
argument, any `BackchannelError` whose class is `model_visible`) goes back to the model as an error
result; any other exception is an infrastructure error for the operator and fails the turn.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ...addresses import Target
from ...errors import BackchannelError
from ...home.profiles import Profile
from ...home.redact import redact
from ...outcome import GroupResult, Outcome, Result, error_body, of_error
from ..engines.base import ToolSpec
from ..memories import FileMemories, Memories

if TYPE_CHECKING:
    from opentelemetry.context import Context


class ToolFailure(Exception):
    """An error the model should see and can act on: `code` is machine-readable; `outcome` what it means
    for the call (refused by default: the call cannot succeed as it was made)."""

    def __init__(self, code: str, message: str, *, outcome: Outcome = Outcome.REFUSED) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.outcome = outcome


@dataclass(frozen=True)
class Asked:
    """A question the turn asks its person (`ask_person`): the turn ends once its step's tools ran, its run
    waiting for the answer. `id` is the question's, told to the model."""

    id: str
    question: str
    choices: tuple[str, ...] | None = None
    default: str | None = None
    expires_in: float | None = None


@dataclass
class ToolContext:
    """The turn calling a tool: its profile and session, the run it handles, and where that run stands."""

    profile: Profile
    session_id: str
    run_id: str
    hops: int = 0
    chain: tuple[str, ...] = ()
    exchange: str = ""  # the run of the person's message this turn descends from
    sender: Sender | None = None
    memories: Memories = field(default_factory=FileMemories)
    trace: Context | None = None  # the turn's trace context (its run's span), for a tool called from outside it
    asked: Asked | None = None  # the question the turn asked its person: it ends after this step
    deadline: float | None = None  # its run's deadline (backchannel.deadlines): what the turn's sends inherit
    _sends: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"{self.profile.name}/{self.session_id}"

    def ordinal(self, target: str, message: str) -> int:
        """How many times this turn already sent these words to this target (0 the first time)."""
        count = self._sends.get((target, message), 0)
        self._sends[(target, message)] = count + 1
        return count

    def messenger(self) -> Sender:
        if self.sender is None:
            raise ToolFailure("unavailable", "messaging is not available in this turn", outcome=Outcome.FAILED)
        return self.sender


class Sender(Protocol):
    """What the messaging tools may do: the delivery service as a turn's agent sees it."""

    async def send(
        self,
        ctx: ToolContext,
        address: str,
        message: str,
        *,
        wait: float,
        steer: bool = False,
        deadline: float | None = None,
    ) -> Result: ...

    async def send_peer(
        self, ctx: ToolContext, target: str, message: str, *, wait: float, deadline: float | None = None
    ) -> Result: ...

    async def answer_peer(self, ctx: ToolContext, target: str, run_id: str, answer: str) -> Result: ...

    async def send_group(self, ctx: ToolContext, group: str, message: str, *, wait: float) -> GroupResult: ...

    async def send_to(self, ctx: ToolContext, to: Target, message: str, *, wait: float) -> Result | GroupResult: ...

    async def notify_when_idle(self, ctx: ToolContext, address: str) -> Result: ...

    async def check(self, ctx: ToolContext, run_id: str) -> Result: ...

    async def cancel(self, ctx: ToolContext, run_id: str) -> Result: ...

    async def targets(self, ctx: ToolContext, profile: str | None) -> list[dict[str, Any]]: ...


Handler = Callable[[dict[str, Any], ToolContext], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    handler: Handler

    @property
    def name(self) -> str:
        return self.spec.name


def error_result(code: str, message: str, outcome: Outcome = Outcome.REFUSED) -> str:
    """A tool's error as the JSON text a model reads: its `result` and the error."""
    return json.dumps(error_body(outcome, code, message), ensure_ascii=False)


async def call_tool(
    tools: Mapping[str, Tool], name: str, arguments: dict[str, Any] | str, ctx: ToolContext
) -> tuple[str, bool]:
    """Run one tool call; returns (JSON result text, ok). The model's errors are results, not exceptions."""
    tool = tools.get(name)
    if tool is None:
        return error_result("unknown_tool", f"no tool {name!r}; available: {', '.join(sorted(tools)) or 'none'}"), False
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            return error_result("invalid_arguments", f"arguments of {name!r} are not valid JSON: {exc.msg}"), False
        if not isinstance(parsed, dict):
            return error_result("invalid_arguments", f"arguments of {name!r} must be a JSON object"), False
        arguments = parsed
    try:
        result = await tool.handler(arguments, ctx)
    except ToolFailure as exc:
        return error_result(exc.code, exc.message, exc.outcome), False
    except BackchannelError as exc:
        if not exc.model_visible:
            raise  # the operator's problem: the turn fails with it
        # A result may leave the gateway (a Hermes agent's tool call, an MCP host's): no path of the home in it.
        return error_result(exc.code, redact(exc, ctx.profile.path.parent.parent).message, of_error(exc)), False
    ok = "error" not in result
    return json.dumps(result, ensure_ascii=False), ok


def require_str(args: Mapping[str, Any], key: str, *, optional: bool = False) -> str:
    value = args.get(key)
    if value is None and optional:
        return ""
    if not isinstance(value, str):
        raise ToolFailure("invalid_arguments", f"argument {key!r} must be a string")
    return value
