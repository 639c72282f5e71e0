"""What a CLI command says to this home's gateway: the `GatewayLink` protocol, whichever way it is reached.

    GatewayLink   resolve (an address to its session), deliver (a message, shown live or not), dm (to a
                  peer's agent), run, stop, events (a run's progress until its end)
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

from ..addresses import LocalAddress
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

    async def resolve(self, address: LocalAddress) -> Where:
        """The session a local address names: a profile is its Bot Chat (made on first use); a Hermes session id
        not seen yet is imported."""
        ...

    async def dm(self, peer: str, agent: str | None, message: str, *, wait: float, key: str) -> Result:
        """Deliver as the person into the Bot Chat of `agent` on peer gateway `peer` (kept in this home's ledger),
        and wait up to `wait` seconds for its reply."""
        ...

    async def send_group(
        self, group: str, message: str, *, wait: float, key: str, sender: str = "human:cli"
    ) -> GroupResult:
        """Deliver to every member of `group` (its name) as the person; each member waited for up to `wait`."""
        ...

    async def deliver(
        self,
        where: Where,
        message: str,
        *,
        wait: float | None,
        key: str,
        sender: str = "human:cli",
        progress: Progress | None = None,
        steer: bool = False,
    ) -> Result:
        """Deliver as the person and wait up to `wait` seconds (None: until the run ends); with `progress`,
        show the run as it goes; with `steer`, into the session's running turn (when it can take it)."""
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
