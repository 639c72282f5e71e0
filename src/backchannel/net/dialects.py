"""The concrete links to peers: the Hermes-dialect client or the A2A client, by what the peer is.

Built by the composition root (`core.gateway`) and handed to the core as `net.link.PeerLinks`; the clients'
modules are loaded only when a peer is messaged.
"""

from __future__ import annotations

import dataclasses

from ..home.peers import Peer
from .a2a_card import AgentCard
from .link import PeerLink


class Dialects:
    """`PeerLinks` over this package's two clients."""

    def __init__(self, *, gateway_id: str = "") -> None:
        self.gateway_id = gateway_id

    def link(self, peer: Peer, agent: str | None) -> PeerLink:
        """The link to `agent` on `peer`; for a peer at several URLs (`failover_urls`), one over them all."""
        if peer.failover_urls:
            from .failover import FailoverLink

            return FailoverLink(
                lambda url: self._one(dataclasses.replace(peer, url=url, failover_urls=()), agent),
                peer.urls,
                ask_again_when_unknown=bool(peer.gateway_id) and not peer.is_a2a,  # a Backchannel peer: keyed runs
            )
        return self._one(peer, agent)

    def _one(self, peer: Peer, agent: str | None) -> PeerLink:
        if peer.is_a2a:
            from .a2a_peer import A2APeerClient

            return A2APeerClient(peer, agent, gateway_id=self.gateway_id)
        from .peer import PeerClient

        return PeerClient(peer, agent, gateway_id=self.gateway_id)

    async def card(self, peer: Peer, *, timeout: float) -> AgentCard:
        from .a2a_peer import A2APeerClient

        async with A2APeerClient(dataclasses.replace(peer, dialect="a2a", a2a_url=None)) as client:
            card = await client.card(strict=True, timeout=timeout)
        assert card is not None  # strict: a card, or PeerError
        return card
