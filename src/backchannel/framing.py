"""How a message is shown to the agent that receives it: a person's words as they are, anyone else's framed."""

from __future__ import annotations

import re
from dataclasses import dataclass

_FRAME_RE = re.compile(r"\[Message from (?P<origin>.+?) via (?P<via>.+?) — another agent, not your user\]\n")


@dataclass(frozen=True)
class Framed:
    """A framed message taken apart: who it came from (`session …`, `peer …`), via what, and its text."""

    origin: str
    via: str
    text: str


def is_human(sender: str) -> bool:
    return sender.startswith("human:")


def frame(sender: str, message: str, *, via: str = "send_to_session") -> str:
    """Provenance first, so another agent's text is never taken for the person's."""
    if is_human(sender):
        return message
    if sender.startswith("peer:"):
        origin = f"peer {sender[5:]}"
        via = "the peer API" if via == "send_to_session" else via
    else:
        origin = f"session {sender}"
    return f"[Message from {origin} via {via} — another agent, not your user]\n{message}"


def unframe(content: str) -> Framed | None:
    """The parts of a message that `frame` framed; None for a person's words (or text that only looks framed
    without a run from another agent to say so: the caller checks the run's sender)."""
    found = _FRAME_RE.match(content)
    if found is None:
        return None
    return Framed(origin=found["origin"], via=found["via"], text=content[found.end() :])
