"""How a message is shown to the agent that receives it: a person's words as they are, anyone else's framed.

The frame's lines are the only ones of their kind in a model's input: each line of another agent's text
that begins with a bracket (after blanks and invisible characters; `[` and its look-alikes) is shown
with a backslash before it, so no text can open, close or fake a frame. The store keeps the raw text.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

BRACKETS = frozenset("[［⟦〚【〔⁅")
ESCAPE = "\\"

_FRAME_RE = re.compile(r"\[Message from (?P<origin>.+?) via (?P<via>.+?) — another agent, not your user\]\n")


@dataclass(frozen=True)
class Framed:
    """A framed message taken apart: who it came from (`session …`, `peer …`), via what, and its text."""

    origin: str
    via: str
    text: str


def is_human(sender: str) -> bool:
    return sender.startswith("human:")


def origin(sender: str) -> str:
    """Who a non-human sender is, as a frame names it."""
    return f"peer {sender[5:]}" if sender.startswith("peer:") else f"session {sender}"


def quote(text: str) -> str:
    """Another agent's text with every line that could pass for a frame line escaped (every line break counts)."""
    lines = text.splitlines(keepends=True)
    return "".join(ESCAPE + line if _opens_with_bracket(line) else line for line in lines)


def frame(sender: str, message: str, *, via: str = "send_to_session") -> str:
    """Provenance first, so another agent's text is never taken for the person's."""
    if is_human(sender):
        return message
    if sender.startswith("peer:") and via == "send_to_session":
        via = "the peer API"
    return f"[Message from {origin(sender)} via {via} — another agent, not your user]\n{quote(message)}"


def frame_reply(sender: str, message: str, *, via: str) -> str:
    """A framed message with a closing line too, for a reply shown among other text (a mention's)."""
    return f"{frame(sender, message, via=via)}\n[End of the message from {origin(sender)}]"


def _opens_with_bracket(line: str) -> bool:
    for char in line:
        if char.isspace() or unicodedata.category(char) in ("Cf", "Cc", "Zs"):
            continue
        return char in BRACKETS
    return False


def unframe(content: str) -> Framed | None:
    """The parts of a message that `frame` framed; None for a person's words (or text that only looks framed
    without a run from another agent to say so: the caller checks the run's sender)."""
    found = _FRAME_RE.match(content)
    if found is None:
        return None
    return Framed(origin=found["origin"], via=found["via"], text=content[found.end() :])
