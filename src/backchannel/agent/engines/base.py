"""The engine interface: one model step, given a prompt, history and tools; nothing of routing or storage."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ...messages import Message


@dataclass(frozen=True)
class ToolSpec:
    """A function tool as offered to a model (JSON schema parameters)."""

    name: str
    description: str
    parameters: dict[str, Any]

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class ChatPath(Protocol):
    """The way into a session of the far side that a person drives from a chat platform: the turn is handed to
    that side's own chat pipeline (behind the person's turn there), and its reply handed back."""

    async def deliver(self, remote_session: str, message: str) -> str | None:
        """The reply; None when no chat drives that session after all (reach it the usual way). Raises
        EngineError when the far side cannot take it (HermesPluginAbsent) or the turn failed there."""
        ...

    async def withdraw(self) -> bool:
        """Take the message back (its turn was stopped) if the far side has not begun running it; whether it was."""
        ...


@dataclass(frozen=True)
class TurnQuestion:
    """What a far side's turn asks its person while it waits (a Hermes run's approval): `key` names it across
    attempts of the turn (the same key asked again after a restart is the same question), `default` is taken when
    it expires or the person declines."""

    key: str
    question: str
    choices: tuple[str, ...]
    default: str
    expires_in: float | None = None


class PersonLine(Protocol):
    """The way a running turn asks the person of its run and waits for the answer (its run stays running)."""

    async def ask(self, question: TurnQuestion) -> str:
        """The person's answer (one of the choices), or the default once it expired or was declined."""
        ...

    async def withdraw(self, key: str, *, by: str) -> None:
        """The far side went on without the answer: the question, if still open, is closed (`by` says who)."""
        ...


@dataclass
class SessionLink:
    """The session a turn runs in, for an engine that keeps its sessions elsewhere (hermes): the engine sets
    `remote_id` to the id the session has there, and moves it when that side rotates the id."""

    id: str
    title: str | None = None
    remote_id: str | None = None
    # Set when an earlier attempt of this turn was cut (its gateway stopped or died mid-turn): how many of
    # this session's messages here are already the turn's message. The far side may hold one more, the cut
    # attempt's, perhaps answered there; an engine that can read it recovers that answer instead of sending.
    interrupted_copies: int | None = None
    # How a session that a person drives from a chat platform is reached (None: the engine has no such way).
    chat: ChatPath | None = None
    # Who sent the turn's message (a run's sender: `human:cli`, an agent's address, `peer:NAME/profile`), for a far
    # side that records who speaks.
    sender: str | None = None
    # The run this turn answers: every attempt of it asks the far side under the same key (a far side that keeps
    # runs finds the earlier attempt's). `stopped` says, once the step is cancelled, whether a stop asked it (the
    # far side's turn is stopped too) or the gateway is going away (it is left to run, to be found again).
    run_id: str | None = None
    stopped: Callable[[], bool] | None = None
    # The far side's own run for the step in progress (a Hermes run's id), while it runs: a call its tools make says
    # it, and is bound to this turn by it.
    remote_run: str | None = None
    # How the far side's turn asks this run's person while it waits (None: it cannot; the far side's default holds).
    person: PersonLine | None = None


@dataclass(frozen=True)
class ModelRequest:
    profile: str
    system_prompt: str
    messages: Sequence[Message]  # history and the turn so far, oldest first, without the system prompt
    tools: Sequence[ToolSpec]
    session: SessionLink | None = None


OnDelta = Callable[[str], None]


class Engine(Protocol):
    """Computes one model step. Returns an assistant message, with tool calls or a final answer.

    Raises `EngineError` naming the profile and endpoint when the model cannot answer.
    Must be cancellable: a cancelled step abandons its in-flight request at once.
    """

    name: str
    # False for an engine that reads only the turn at hand (echo), or keeps the context itself (hermes):
    # the session's history and the system prompt are then not loaded, which keeps long sessions cheap.
    uses_context: bool
    # True for an engine whose agent keeps the session itself (hermes): its turns read the session's link (title, its
    # id over there) and, run again after a cut, count the copies of the message the far side may have kept.
    keeps_session: bool
    # False for an engine whose agent has tools of its own (hermes: Backchannel's reach it through the plugin).
    offers_tools: bool

    async def step(self, request: ModelRequest, on_delta: OnDelta | None = None) -> Message: ...

    async def aclose(self) -> None: ...
