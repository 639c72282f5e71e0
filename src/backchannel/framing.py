"""How a message is shown to the agent that receives it: a person's words as they are, anyone else's framed.

The frame's lines are the only ones of their kind in a model's input: each line of another agent's text
that begins with a bracket (after blanks, invisible characters and combining marks) is shown with a
backslash before it, so no text can open, close or fake a frame. A bracket is told by its Unicode
properties, not by a list: any opening or closing punctuation (Ps, Pe: every bracket of every script,
fullwidth and small forms included), anything whose name says BRACKET (the bracket pieces ⎡ ⎣ ⎤ …), anything
whose compatibility form begins with one (⑴, ［), and a character this Python's Unicode data does not know
or a private-use one (it could be a bracket to the model's font). Unicode's own confusables data
(UTS #39) has no entry for `[` or `]` at all, so it adds nothing here. The store keeps the raw text.

Backchannel's own lines (the frame, a wake-up's heading naming the message it answers) are never escaped.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

from . import addresses

ESCAPE = "\\"
_CLEAR = ("Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Mc", "Me")  # blanks, invisible characters, marks: looked past
_UNKNOWN = ("Cn", "Co")  # unassigned here, or private use: taken for a bracket

_FRAME_RE = re.compile(r"\[Message from (?P<origin>.+?) via (?P<via>.+?) — another agent, not your user\]\n")


@dataclass(frozen=True)
class Framed:
    """A framed message taken apart: who it came from (`session …`, `peer …`), via what, and its text."""

    origin: str
    via: str
    text: str


ROOM_SENDER = "human:room"  # who a member's room turn comes from: the person's room (its mentions are not asked)


def is_human(sender: str) -> bool:
    return sender.startswith("human:")


def origin(sender: str) -> str:
    """Who a non-human sender is, as a frame names it."""
    return f"peer {addresses.peer_path(sender)}" if addresses.is_remote(sender) else f"session {sender}"


def quote(text: str) -> str:
    """Another agent's text with every line that could pass for a frame line escaped (every line break counts)."""
    lines = text.splitlines(keepends=True)
    return "".join(ESCAPE + line if _opens_with_bracket(line) else line for line in lines)


def frame(sender: str, message: str, *, via: str = "send_to_session", heading: str | None = None) -> str:
    """Provenance first, so another agent's text is never taken for the person's. `heading` is a line of
    Backchannel's own (a wake-up's `[Reply to your message …]`): shown after the frame as it is."""
    if is_human(sender):
        return message
    if addresses.is_remote(sender) and via == "send_to_session":
        via = "the peer API"
    own = f"{heading}\n" if heading else ""
    return f"[Message from {origin(sender)} via {via} — another agent, not your user]\n{own}{quote(message)}"


def reply_heading(run_id: str, message: str) -> str:
    """The first line of a wake-up, Backchannel's own: which of the sender's messages it answers (one line: the
    message's first line, quoted with repr, so no line break or control character of it gets through)."""
    return f"[Reply to your message {run_id} ({_first_line(message)!r})]"


def question_heading(run_id: str, message: str) -> str:
    """The first line of a wake-up that brings the question a peer's agent asks in the run of one of the sender's
    messages (the sender had its receipt): which message, and how to answer."""
    return (
        f"[Question about your message {run_id} ({_first_line(message)!r}): the other agent asks, and its run waits"
        f" for your answer. Answer with send_to_peer: the same target, your answer as the message, run_id {run_id}]"
    )


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0][:120] if message.strip() else ""


def split_reply(text: str) -> tuple[str, str]:
    """A wake-up's text as `reply_heading` and `Wakes` made it: (our heading, the outcome that answers)."""
    heading, _, outcome = text.partition("\n")
    return heading, outcome


ANSWER_HEADING = "[Your person "  # how every line of Backchannel's own that gives a turn its person's answer begins


def frame_answer(question_id: str, question: str, state: str, answer: str | None) -> str:
    """The message that resumes a run whose turn asked its person (`ask_person`): a heading of Backchannel's own
    naming the question (quoted with repr: one line), then the person's words as they are (theirs: not escaped).
    `state`: answered, defaulted (the question expired: its default, or none) or cancelled (the person declined)."""
    asked = repr(question.strip().splitlines()[0][:120] if question.strip() else "")
    if state == "answered":
        return f"{ANSWER_HEADING}answered your question {question_id} ({asked}):]\n{answer or ''}"
    if state == "defaulted" and answer is not None:
        return f"{ANSWER_HEADING}did not answer your question {question_id} ({asked}) in time; its default:]\n{answer}"
    if state == "defaulted":
        return f"{ANSWER_HEADING}did not answer your question {question_id} ({asked}) before it expired]"
    return f"{ANSWER_HEADING}declined to answer your question {question_id} ({asked}); go on without it]"


def frame_reply(sender: str, message: str, *, via: str) -> str:
    """A framed message with a closing line too, for a reply shown among other text (a mention's)."""
    return f"{frame(sender, message, via=via)}\n[End of the message from {origin(sender)}]"


def _opens_with_bracket(line: str) -> bool:
    for char in line:
        if char.isspace() or unicodedata.category(char) in _CLEAR:
            continue
        return is_bracket(char)
    return False


@functools.lru_cache(maxsize=4096)
def is_bracket(char: str) -> bool:
    """Whether a model could take `char` for a bracket that opens a frame line (see the module's docstring)."""
    category = unicodedata.category(char)
    if category in ("Ps", "Pe") or category in _UNKNOWN or "BRACKET" in unicodedata.name(char, ""):
        return True
    folded = unicodedata.normalize("NFKC", char)
    return folded != char and bool(folded) and is_bracket(folded[0])


def unframe(content: str) -> Framed | None:
    """The parts of a message that `frame` framed; None for a person's words (or text that only looks framed
    without a run from another agent to say so: the caller checks the run's sender)."""
    found = _FRAME_RE.match(content)
    if found is None:
        return None
    return Framed(origin=found["origin"], via=found["via"], text=content[found.end() :])
