"""A run's live events, one union: what the event hub publishes, the API sends in an event stream (each event's
`to_dict()` as the JSON of its `data:`), the gateways of a shared store relay, and `event_of` reads back, from our
own streams and from a peer's.

    Queued    run.queued                    waits in its session's queue behind `ahead` runs (a watcher looks)
    Held      run.held                      waits for the person's approval (a hold rule)
    Asked     run.input_required            its turn asked its person (`ask_person`): it waits for the answer
    Started   run.started                   its turn began (a message steered into a turn: the run it joined)
    Chunk     message.delta                 text of the reply as the engine writes it
    Step      tool.started, tool.completed  a tool step of the turn
    Steered   turn.steered                  a message joined the turn (`steered_run`: its own run)
    Ended     run.<state>                   its end: run.completed, run.failed, run.cancelled, run.expired, …
    Other     any other name                a peer's event none of these is (peer.reconnecting, run.running, …)

Every event's object is `{"event": NAME, "run_id": …, "timestamp": …, …}` with its own keys after.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .outcome import of_state, said_state

_BASE = ("event", "run_id", "timestamp")


@dataclass(frozen=True)
class _Said:
    """What every event has: its run (empty when a peer's event does not say it), and when it was said."""

    run_id: str
    timestamp: float = field(default_factory=time.time, kw_only=True)
    ends: ClassVar[bool] = False  # the run's closing event


@dataclass(frozen=True)
class Queued(_Said):
    """The run waits in its session's queue behind `ahead` runs (the running one too; None: not said)."""

    ahead: int | None = None
    name: ClassVar[str] = "run.queued"

    def to_dict(self) -> dict[str, Any]:
        return _object(self, runs_ahead=self.ahead)


@dataclass(frozen=True)
class Held(_Said):
    """The run waits for the person's approval (a hold rule)."""

    name: ClassVar[str] = "run.held"

    def to_dict(self) -> dict[str, Any]:
        return _object(self)


@dataclass(frozen=True)
class Asked(_Said):
    """The run's turn asked its person (`ask_person`) and ended there: the run waits `input_required` for the answer
    to question `question_id`, then runs again (not its end)."""

    question_id: str = ""
    question: str = ""
    name: ClassVar[str] = "run.input_required"

    def to_dict(self) -> dict[str, Any]:
        return _object(self, question_id=self.question_id, question=self.question)


@dataclass(frozen=True)
class Started(_Said):
    """The run's turn began; a message steered into a running turn starts with it (`steered_into`: that run)."""

    session_id: str | None = None
    steered_into: str | None = None
    name: ClassVar[str] = "run.started"

    def to_dict(self) -> dict[str, Any]:
        steered = {"steered_into": self.steered_into} if self.steered_into else {}
        return _object(self, session_id=self.session_id, **steered)


@dataclass(frozen=True)
class Chunk(_Said):
    """Text of the reply as the engine writes it."""

    text: str
    name: ClassVar[str] = "message.delta"

    def to_dict(self) -> dict[str, Any]:
        return _object(self, delta=self.text)


@dataclass(frozen=True)
class Step(_Said):
    """A tool step of the turn: `name` is `tool.started` (with a `preview` of its arguments) or `tool.completed`
    (with its `duration` in seconds and its `error`, None when it succeeded)."""

    name: str  # a field here, a class constant in the others
    tool: str
    preview: Any = None
    duration: Any = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.name == "tool.started":
            return _object(self, tool=self.tool, preview=self.preview)
        return _object(self, tool=self.tool, duration=self.duration, error=self.error)


@dataclass(frozen=True)
class Steered(_Said):
    """A message joined the running turn (`steered_run`: the message's own run)."""

    steered_run: str
    name: ClassVar[str] = "turn.steered"

    def to_dict(self) -> dict[str, Any]:
        return _object(self, steered_run=self.steered_run)


@dataclass(frozen=True)
class Ended(_Said):
    """The run's end: its state (`completed`, `failed`, …, or a peer's word that settles it), its reply (for a
    run that did not complete, whatever partial output it kept), its error and code."""

    state: str
    output: str | None = None
    error: str | None = None
    code: str | None = None
    session_id: str | None = None
    ends: ClassVar[bool] = True

    @property
    def name(self) -> str:
        return f"run.{self.state}"

    def to_dict(self) -> dict[str, Any]:
        if self.state == "completed":
            return _object(self, session_id=self.session_id, output=self.output or "")
        return _object(self, session_id=self.session_id, error=self.error, code=self.code, output=self.output)


@dataclass(frozen=True)
class Other(_Said):
    """An event of a name none of the others has (a peer's, or a stream's own such as `stream.closed`): its
    name and the rest of its object, carried as they were said."""

    name: str
    data: Mapping[str, Any] = field(default_factory=dict)

    @property
    def error(self) -> str | None:
        return _text(self.data.get("error"))

    def to_dict(self) -> dict[str, Any]:
        return _object(self, **{k: v for k, v in self.data.items() if k not in _BASE})


Event = Queued | Held | Asked | Started | Chunk | Step | Steered | Ended | Other


def event_of(data: Mapping[str, Any]) -> Event:
    """An event as its JSON object says it (ours, relayed or streamed; a peer's): any name is carried, a name of
    none of ours as `Other`; `run.<state>` for a state that settles the run (in a peer's words too) is its end."""
    name, run_id, given = str(data.get("event")), str(data.get("run_id") or ""), data.get("timestamp")
    at = {"timestamp": float(given)} if isinstance(given, int | float) and not isinstance(given, bool) else {}
    if name == Started.name:
        return Started(run_id, _text(data.get("session_id")), _text(data.get("steered_into")), **at)
    if name == Chunk.name:
        return Chunk(run_id, str(data.get("delta") or ""), **at)
    if name in ("tool.started", "tool.completed"):
        tool, error = str(data.get("tool") or ""), _said(data.get("error"))
        return Step(run_id, name, tool, data.get("preview"), data.get("duration"), error, **at)
    if name == Steered.name:
        return Steered(run_id, str(data.get("steered_run") or ""), **at)
    if name == Queued.name:
        ahead = data.get("runs_ahead")
        return Queued(run_id, ahead if isinstance(ahead, int) and not isinstance(ahead, bool) else None, **at)
    if name == Held.name:
        return Held(run_id, **at)
    if name == Asked.name:
        return Asked(run_id, str(data.get("question_id") or ""), str(data.get("question") or ""), **at)
    state, output = name.removeprefix("run."), data.get("output")
    if state != name and of_state(said_state(state)).settled:
        output = output if isinstance(output, str) else None
        error, code, session_id = _said(data.get("error")), _said(data.get("code")), _text(data.get("session_id"))
        return Ended(run_id, state, output, error, code, session_id, **at)
    return Other(run_id, name, {k: v for k, v in data.items() if k not in _BASE}, **at)


def _object(event: Event, **data: Any) -> dict[str, Any]:
    return {"event": event.name, "run_id": event.run_id, "timestamp": event.timestamp, **data}


def _said(value: Any) -> str | None:
    return None if value is None else str(value)


def _text(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None
