"""A room's transcript as every layer sees it: the room, its lines, and the rounds the person's messages open.

A pure module below the store (as `states` is), so that the surfaces show a room without the store's rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SAID = "said"  # a person's line, or Backchannel's own note
ASKED = "running"  # a member's line while it answers


@dataclass(frozen=True)
class Room:
    """A room and its members, in their order."""

    name: str
    members: tuple[str, ...]
    created_at: float


@dataclass(frozen=True)
class Line:
    """One line of a room's transcript: who said it, what, and (a member's answer) its run and state."""

    seq: int
    room: str
    round: str
    speaker: str  # the person (`human:<surface>`), a member's address, or `backchannel` for a note
    text: str
    state: str  # said, running (being answered), completed, failed, ...
    run_id: str | None
    error: str | None
    created_at: float
    updated_at: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "speaker": self.speaker,
            "text": self.text,
            "state": self.state,
            "run_id": self.run_id,
            "error": self.error,
            "at": self.created_at,
        }


@dataclass(frozen=True)
class Waiting:
    """A member still to answer in a round, and how many hand-offs led to it (0: its turn in the order)."""

    member: str
    depth: int = 0


@dataclass(frozen=True)
class Round:
    """What one of the person's messages set going: the members still to answer, the answers so far, and the
    line of the member answering now."""

    id: str
    room: str
    line: int
    waiting: tuple[Waiting, ...]
    answers: int
    pending: int | None
    depth: int  # the hand-offs that led to the member answering now
    state: str  # open | done
