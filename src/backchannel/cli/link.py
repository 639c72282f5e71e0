"""What a CLI command's messages are made of, whichever gateway answers them (`link_http.HttpGateway`).

Where         the session a message goes to
Progress      what a live delivery shows as it goes (the reply's text, waits in the queue)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..addresses import LocalAddress

FOLLOW_WAIT_SECONDS = 600.0  # a wait for the end is asked of the gateway in bounds of this long


@dataclass(frozen=True)
class Where:
    """A session of this home, as a message's target."""

    profile: str
    session_id: str

    @property
    def to(self) -> str:
        return f"{self.profile}/{self.session_id}"

    @property
    def address(self) -> LocalAddress:
        return LocalAddress(self.profile, self.session_id)


class Progress(Protocol):
    """What a live delivery is told as its run goes."""

    def waiting(self, ahead: int, where: str) -> None:
        """The run waits behind `ahead` runs of its session (`where`)."""
        ...

    def delta(self, text: str) -> None:
        """More of the reply's text."""
        ...
