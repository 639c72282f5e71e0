"""What the core says to another gateway, in typed values: the `PeerLink` protocol and what it answers.

    PeerLink       dm, start, status, stop, events (and what the peer is: about, health) for one peer target
    Run            a peer's run (`outcome.Run`): its state in our words, what it produced, what the peer showed
    Envelope       what a message to a peer carries besides its text (sender, hop, chain, exchange)
    PeerAbout      what a peer says it is (platform, version, gateway id, what it replays)

The Hermes-dialect client (`net.peer`) and the A2A client (`net.a2a_peer`) implement `PeerLink`; the core
is given links (built by the composition root) and reads nothing of either wire. A run's events are those of
`backchannel.events`, whoever runs it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol, Self

from ..events import Event
from ..home.peers import Peer
from ..outcome import Result, Run
from .a2a_card import AgentCard


@dataclass(frozen=True)
class Envelope:
    """What a message to a peer carries besides its text: the profile that sends it, its hop, the sessions waiting
    on it (oldest first) and the exchange it belongs to (None: not said)."""

    sender: str = "default"
    hops: int = 0
    chain: tuple[str, ...] = ()
    exchange: str | None = None
    deadline: float | None = None  # when its sender stops waiting (backchannel.deadlines)


PLAIN = Envelope()  # the person's own message: hop 0, nothing waiting on it
UNREACHABLE = "is it running, and is that its URL? (`backchannel doctor` checks each peer)"  # a peer nothing answers at


def key_refused(name: str, url: str) -> str:
    """What to do when a peer refuses the key kept for it."""
    return (
        f"ask its person for a key (`backchannel key create NAME` on their side) and keep it here with"
        f" `backchannel peer add {name} --url {url}`"
    )


@dataclass(frozen=True)
class PeerAbout:
    """What a peer says it is. `answered`: it said anything at all (an empty answer is a peer that is silent
    on the question, or something that is not a gateway)."""

    answered: bool = False
    platform: str | None = None
    version: str | None = None
    gateway_id: str | None = None
    person_key: bool = False  # the peer takes our key as its person's (it reaches everything there)
    durable_replay: bool = False  # runs asked again with the same key are replayed, across a restart too

    def over(self, other: PeerAbout) -> PeerAbout:
        """This answer, with what `other` says where this one says nothing (health under capabilities)."""
        return PeerAbout(
            answered=self.answered or other.answered,
            platform=self.platform or other.platform,
            version=self.version or other.version,
            gateway_id=self.gateway_id or other.gateway_id,
            person_key=self.person_key or other.person_key,
            durable_replay=self.durable_replay or other.durable_replay,
        )

    @property
    def backchannel_id(self) -> str | None:
        """The gateway id of a Backchannel peer (None for any other platform)."""
        return self.gateway_id if self.platform == "backchannel" else None


class PeerLink(Protocol):
    """One peer target (a gateway, one of its agents, or an A2A agent) as the core speaks to it.

    Errors are classes (`errors.PeerUnreachable`, `PeerAuthRefused`, `PeerRefused`, `PeerOutcomeUnknown`,
    `NoEventStream`, …); a message's answer is a `Result`, a run's state a `Run`."""

    to: str  # the target's address, `peer:NAME[/AGENT]`

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def about(self, *, timeout: float = 10, strict: bool = False) -> PeerAbout:
        """What the peer says it is (its capabilities); an empty answer on any failure unless `strict`."""
        ...

    async def health(self) -> PeerAbout:
        """What the peer's health answer says (never raises)."""
        ...

    async def dm(
        self,
        message: str,
        *,
        wait: float,
        key: str,
        envelope: Envelope = PLAIN,
    ) -> Result:
        """Deliver and wait up to `wait` seconds: the reply, a receipt, a refusal, or unknown."""
        ...

    async def start(
        self,
        message: str,
        *,
        key: str,
        envelope: Envelope = PLAIN,
    ) -> Result:
        """Start a turn and return at once: a receipt with the run id (or a refusal, a failure)."""
        ...

    async def status(self, run_id: str) -> Run | None:
        """The run as the peer knows it; None when it does not (expired, restarted, never)."""
        ...

    async def stop(self, run_id: str) -> Run:
        """Cancel the run; what it became."""
        ...

    async def answer(self, run_id: str, session_id: str | None, text: str, *, key: str) -> None:
        """Our sender's answer to the question the run asks (input_required); PeerError when not taken."""
        ...

    def events(self, run_id: str) -> AsyncIterator[Event]:
        """The run's events as they happen, until the stream ends; `NoEventStream` when there is none."""
        ...


class PeerLinks(Protocol):
    """The links to peers, in each peer's dialect (built by the composition root)."""

    def link(self, peer: Peer, agent: str | None) -> PeerLink:
        """The link to `agent` on `peer` (its Bot Chat; None: the peer's default agent)."""
        ...

    async def card(self, peer: Peer, *, timeout: float) -> AgentCard:
        """The A2A agent card at the peer's URL (its well-known card, or the URL itself); PeerError if none."""
        ...
