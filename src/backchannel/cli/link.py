"""What a CLI command says to this home's gateway: the `GatewayLink` protocol, whichever way it is reached.

    GatewayLink   send (a message to any address, shown live or not), run, stop, events (a run's progress
                  until its end)
    Where         the session a message goes to
    Progress      what a live delivery shows as it goes (the reply's text, waits in the queue)

Two implementations: `link_http.HttpGateway` (the running gateway, over HTTP) and `link_local.LocalGateway`
(the same gateway in-process, through the composition root). Both answer `Result` and `RunEvent`s;
`connect.gateway_link` picks one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol

from ..addresses import LocalAddress, Target
from ..net.link import RunEvent
from ..outcome import GroupResult, Result

FOLLOW_WAIT_SECONDS = 600.0  # a wait for the end is asked of the gateway in bounds of this long


class Session(Protocol):
    """A session as the core's directory gives it: what a target needs of it."""

    @property
    def id(self) -> str: ...

    @property
    def profile(self) -> str: ...


@dataclass(frozen=True)
class Where:
    """A session of this home, as a message's target."""

    profile: str
    session_id: str

    @classmethod
    def of(cls, session: Session) -> Where:
        return cls(session.profile, session.id)

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


class GatewayLink(Protocol):
    """This home's gateway as the CLI speaks to it: its answers are outcomes (`Result`) and run events."""

    via: Literal["gateway", "local"]

    async def send(
        self,
        to: Target,
        message: str,
        *,
        wait: float | None,
        key: str,
        sender: str = "human:cli",
        progress: Progress | None = None,
        steer: bool = False,
    ) -> Result | GroupResult:
        """Deliver as the person to any address (a profile: its Bot Chat, made on first use; a peer's agent; each
        member of a group) and wait up to `wait` seconds (None: until the run ends); with `progress`, show a
        session's run as it goes; with `steer`, into the session's running turn (when it can take it)."""
        ...

    async def run(self, run_id: str) -> Result:
        """A run's outcome as it stands."""
        ...

    async def stop(self, run_id: str) -> Result:
        """Cancel a queued or held run, or interrupt its turn; what it became."""
        ...

    def events(self, run_id: str) -> AsyncIterator[RunEvent]:
        """A run's events, past and future, until it ends."""
        ...
