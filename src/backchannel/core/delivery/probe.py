"""What a peer's URL turns out to be, asked before the peer is added (`backchannel peer add`): a gateway, an A2A
agent, or neither; what to tell the person of it. Nothing is saved here."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import (
    NotAnAgentCard,
    PeerAuthRefused,
    PeerError,
    PeerOutcomeUnknown,
    PeerUnreachable,
    UnsupportedBinding,
    UsageError,
)
from ...home.peers import Peer
from ...net import a2a_card
from ...net.link import PeerAbout
from .outbound import Outbound


@dataclass(frozen=True)
class Found:
    """What a new peer's URL turned out to be: its platform, an A2A agent's JSON-RPC URL, what to tell."""

    platform: str | None
    a2a_url: str | None = None
    gateway_id: str | None = None
    notes: tuple[str, ...] = ()


async def examine(outbound: Outbound, p: Peer) -> Found:
    """What answers at the peer's URL: a Hermes-dialect gateway (its /v1/capabilities), else an A2A agent (its
    card). A URL that is down is saved anyway (as a gateway); one that answers as neither is an error (a
    UsageError, `not_a_peer`), and nothing is saved."""
    health, caps, failure, card = await _asked(outbound, p)
    if isinstance(card, a2a_card.AgentCard):
        extension = "declares" if card.extension else "does not declare"
        return Found(
            "a2a",
            a2a_url=card.rpc_url,
            notes=(
                f"peer {p.name} is the A2A agent {card.name} {card.version}".rstrip()
                + f" (JSON-RPC at {card.rpc_url}; streaming {'yes' if card.streaming else 'no'}; "
                f"it {extension} Backchannel's hop and chain extension)",
            ),
        )
    if isinstance(card, UnsupportedBinding):
        raise UsageError(f"{card.message}; nothing was saved", code="not_a_peer")
    if a2a_card.is_card_url(p.url):
        if isinstance(card, NotAnAgentCard):  # its message names the URL already
            raise UsageError(f"{card.message}; nothing was saved", code="not_a_peer")
        why = card.message if card is not None else "no card"
        raise UsageError(f"{p.url} is not a usable A2A agent card ({why}); nothing was saved", code="not_a_peer")
    if not health.answered and isinstance(failure, PeerUnreachable):
        return Found(None, notes=(f"note: nothing answers at {p.url} just now (down, or a wrong URL); saved anyway",))
    if isinstance(failure, PeerAuthRefused):
        return Found(
            None, notes=(f"note: {p.url} answers but refused this key (HTTP 401); saved anyway: check the key",)
        )
    if failure is not None or not caps.answered:
        # an error only when both answered, and as neither; a URL that dropped or timed out is saved anyway
        answered = not any(isinstance(e, PeerOutcomeUnknown | PeerUnreachable) for e in (failure, card) if e)
        if not health.answered and answered:
            raise UsageError(
                f"{p.url} answers as neither a gateway (no /health or /v1/capabilities) nor an A2A agent "
                f"(no agent card at {a2a_card.card_url(p.url)}); nothing was saved",
                code="not_a_peer",
            )
        what = health.platform or "something that is not a gateway"
        return Found(
            health.platform,
            notes=(f"note: {p.url} ({what}) did not answer /v1/capabilities just now; saved anyway",),
        )
    platform = caps.platform or health.platform
    if caps.backchannel_id:
        notes = [f"peer {p.name} is Backchannel gateway {caps.backchannel_id} {caps.version or ''}".rstrip()]
        if caps.person_key:
            notes.append(
                f"warning: {p.name} takes this key as its person's (it reaches everything there): ask for a key "
                f"of our own there, `backchannel key create <our name>`"
            )
        return Found(platform, gateway_id=caps.backchannel_id, notes=tuple(notes))
    return Found(
        platform,
        notes=(f"peer {p.name} is {caps.platform or 'a gateway'} {caps.version or ''}".rstrip(),),
    )


async def _asked(
    outbound: Outbound, p: Peer
) -> tuple[PeerAbout, PeerAbout, PeerError | None, a2a_card.AgentCard | PeerError | None]:
    """Its health and capabilities (their failure), and its agent card (or why none), as far as they were asked."""
    health = PeerAbout()
    caps = PeerAbout()
    failure: PeerError | None = None
    if not a2a_card.is_card_url(p.url):
        async with outbound.client(p, None) as client:
            health = await client.health()
            try:
                caps = await client.about(timeout=min(3, p.timeout_seconds), strict=True)
            except PeerError as exc:
                failure = exc
        if caps.answered or health.platform:  # a gateway (one that refused our key too): no card asked
            return health, caps, failure, None
    try:
        return health, caps, failure, await outbound.agent_card(p, timeout=min(3, p.timeout_seconds))
    except PeerError as exc:
        return health, caps, failure, exc
