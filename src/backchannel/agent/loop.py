"""The agent loop: call the model, run its tool calls, append the results, until a final answer or max_turns."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import addresses, tracing
from ..events import Chunk, Event, Step
from ..home.profiles import Profile
from ..messages import Message, ToolCall, Usage
from ..outcome import Consumed
from .engines.base import Engine, ModelRequest, SessionLink
from .persona import system_prompt
from .tools.base import Asked, Tool, ToolContext, call_tool
from .tools.messaging import offered_all

Emit = Callable[[Event], None]


@dataclass
class TurnProgress:
    """What the turn has produced so far; read when a turn is interrupted, to keep the partial output."""

    messages: list[Message] = field(default_factory=list)
    partial: str = ""
    usage: Usage = field(default_factory=Usage)  # what the turn's model calls read and wrote so far
    cost: float = 0.0  # and cost, in US dollars (the profile's model.prices)
    steered: list[str] = field(default_factory=list)  # the runs of the messages steered into the turn
    stop_requested: bool = False  # a stop asked the turn to end (set before its task is cancelled)
    asked: Asked | None = None  # the turn ended by asking its person this (`ask_person`): its run waits for the answer
    # By run (the turn's own, the steered ones): the model call that first held its message. Saved with the end.
    consumed: dict[str, Consumed] = field(default_factory=dict)
    unread: list[tuple[str, str]] = field(default_factory=list)  # (run, digest of its framed text) not yet read
    _recorded: tuple[Usage, float] = (Usage(), 0.0)

    def unrecorded(self) -> tuple[int, int, float]:
        """Tokens read, written and dollars spent since the last call (each is recorded once)."""
        usage, cost = self._recorded
        self._recorded = (self.usage, self.cost)
        return self.usage.tokens_in - usage.tokens_in, self.usage.tokens_out - usage.tokens_out, self.cost - cost

    def read(self, turn: str, step: int, at: float) -> None:
        """The messages in the input of model call `step`, which answered (or began to): consumed by it."""
        for run_id, digest in self.unread:
            self.consumed.setdefault(run_id, Consumed(turn, step, at, digest))
        self.unread.clear()

    def output(self) -> str:
        done = [m.content for m in self.messages if m.role == "assistant" and m.content]
        return "\n".join([*done, self.partial] if self.partial else done)


async def run_turn(
    *,
    engine: Engine,
    profile: Profile,
    history: Sequence[Message],
    incoming: Message,
    tools: Mapping[str, Tool],
    ctx: ToolContext,
    progress: TurnProgress,
    emit: Emit,
    session: SessionLink | None = None,
    spent: Callable[[TurnProgress], Awaitable[None]] | None = None,
    steered: Callable[[TurnProgress], Awaitable[list[Message]]] | None = None,
) -> str:
    """Run one turn (a step whose tools asked the person, `ask_person`, ends it: `progress.asked`); the new messages
    (incoming first) accumulate in `progress.messages`, what its model calls
    used in `progress.usage` and `cost`, told to `spent` before the tools of a step run (their sends are weighed
    against the budgets with it). Before each model step, and before a final answer ends the turn, the messages
    `steered` gives (sent to the session with mode steer meanwhile) join the turn."""
    prices = profile.config.model.prices
    progress.messages.append(incoming)
    progress.unread.append((ctx.run_id, Consumed.digest_of(incoming.content)))
    rules = profile.config.messaging
    peers = any(addresses.is_remote(pattern) for pattern in rules.allow)  # only a `peer:` pattern reaches one
    offers = engine.offers_tools
    specs = offered_all([t.spec for t in tools.values()], rules.send_options, peers=peers) if offers else ()

    async def join() -> list[Message]:  # the steered messages, each unread until a model call holds it
        assert steered is not None
        taken = len(progress.steered)
        joined = await steered(progress)
        progress.unread.extend(
            zip(progress.steered[taken:], [Consumed.digest_of(m.content) for m in joined], strict=True)
        )
        return joined

    calling = (0, 0.0)  # the model call in progress (1 for the first) and when it began

    def on_delta(text: str) -> None:
        if progress.unread:  # its first words: the model holds its input
            progress.read(ctx.run_id, *calling)
        progress.partial += text
        emit(Chunk(ctx.run_id, text))

    for step in range(profile.config.max_turns):
        if steered is not None and step and progress.messages[-1].role == "tool":
            progress.messages.extend(await join())  # after the tools' results, before the model reads them
        request = ModelRequest(
            profile=profile.name,
            system_prompt=system_prompt(profile, await ctx.memories.notes(profile)) if engine.uses_context else "",
            messages=[*history, *progress.messages],
            tools=specs,
            session=session,
        )
        progress.partial = ""
        calling = (step + 1, time.time())
        with tracing.span_of(_chat_span, engine, profile) as span:
            reply = await engine.step(request, on_delta)
            progress.read(ctx.run_id, *calling)
            if span is not None and reply.usage is not None:
                tracing.annotate(
                    span,
                    {
                        "gen_ai.usage.input_tokens": reply.usage.tokens_in,
                        "gen_ai.usage.output_tokens": reply.usage.tokens_out,
                    },
                )
        progress.partial = ""
        progress.messages.append(reply)
        if reply.usage is not None:
            progress.usage += reply.usage
            progress.cost += prices.cost(reply.usage.tokens_in, reply.usage.tokens_out)
        if not reply.tool_calls:
            last = step + 1 >= profile.config.max_turns
            joined = await join() if steered is not None and not last else []
            if not joined:
                return reply.content
            progress.messages.extend(joined)  # answered by one more step, before the turn ends
            continue
        if spent is not None and reply.usage is not None:
            await spent(progress)
        for call in reply.tool_calls:
            emit(Step(ctx.run_id, "tool.started", call.name, preview=call.arguments[:200]))
            started = time.monotonic()
            with tracing.span_of(_tool_span, call) as span:
                result, ok = await call_tool(tools, call.name, call.arguments, ctx)
                if span is not None and not ok:
                    tracing.annotate(span, {"error.type": _error_code(result)})
            progress.messages.append(Message(role="tool", content=result, tool_call_id=call.id, name=call.name))
            duration, error = round(time.monotonic() - started, 3), None if ok else _error_text(result)
            emit(Step(ctx.run_id, "tool.completed", call.name, duration=duration, error=error))
        if ctx.asked is not None:  # the turn asked its person: it ends here, no further model step
            progress.asked = ctx.asked
            return ""
    note = f"(stopped: {profile.config.max_turns} model calls without a final answer; see agent.max_turns)"
    progress.messages.append(Message(role="assistant", content=note))
    return note


def _chat_span(engine: Engine, profile: Profile) -> tuple[str, str, dict[str, Any]]:
    """A model call's span: `chat <model>`, a client of the engine's model server."""
    model = profile.config.model.model or engine.name
    return (
        f"chat {model}",
        "client",
        {"gen_ai.operation.name": "chat", "gen_ai.provider.name": engine.name, "gen_ai.request.model": model},
    )


def _tool_span(call: ToolCall) -> tuple[str, str, dict[str, Any]]:
    """A tool call's span: `execute_tool <name>`; the messages a tool sends are its children."""
    return (
        f"execute_tool {call.name}",
        "internal",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name, "gen_ai.tool.call.id": call.id},
    )


def _error_code(result: str) -> str:
    """The code of a tool's error result (`{"error": {"code": …}}`), or `tool_error`."""
    try:
        error = json.loads(result).get("error")
    except (ValueError, AttributeError):
        return "tool_error"
    return str(error.get("code") or "tool_error") if isinstance(error, dict) else "tool_error"


def _error_text(result: str) -> Any:
    return result[:300]
