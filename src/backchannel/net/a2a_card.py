"""An A2A agent's card, as a client reads it: where to call it (its JSON-RPC interface), streaming, our extension.

Read as plain JSON (ProtoJSON, camelCase), v1.0's `supportedInterfaces` first, a 0.3 card's `url` and
`preferredTransport`/`additionalInterfaces` as well. No A2A SDK here: reading a card costs no import.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

from .. import a2a_extension
from ..errors import NotAnAgentCard, UnsupportedBinding

WELL_KNOWN = "/.well-known/agent-card.json"
JSONRPC = "JSONRPC"


@dataclass(frozen=True)
class AgentCard:
    """What a client needs of a card: the agent's name and version, its JSON-RPC URL and what it declares."""

    name: str
    version: str
    rpc_url: str
    streaming: bool
    extension: bool  # the Backchannel extension (hops and chain) is declared

    def about(self) -> dict[str, Any]:
        """The card in the shape `health()`/`capabilities()` give of a Hermes-dialect peer."""
        return {"platform": "a2a", "name": self.name, "version": self.version}


def card_url(url: str) -> str:
    """The card of a peer URL: the URL itself when it names a card (`….json`), else its well-known card."""
    path = urllib.parse.urlsplit(url).path
    return url if path.endswith(".json") else url.rstrip("/") + WELL_KNOWN


def is_card_url(url: str) -> bool:
    return urllib.parse.urlsplit(url).path.endswith(".json")


def parse(data: dict[str, Any], where: str) -> AgentCard:
    """A card's JSON; NotAnAgentCard (not a card) or UnsupportedBinding (no JSON-RPC interface) naming `where`."""
    if not isinstance(data.get("name"), str) or not (
        isinstance(data.get("supportedInterfaces"), list) or isinstance(data.get("url"), str)
    ):
        raise NotAnAgentCard(f"{where} is not an A2A agent card (no name and interfaces)")
    rpc = _jsonrpc_url(data)
    if rpc is None:
        offered = ", ".join(sorted(_bindings(data))) or "none"
        raise UnsupportedBinding(
            f"the agent card at {where} offers no JSON-RPC interface (it offers: {offered}); "
            "Backchannel speaks A2A over JSON-RPC"
        )
    given = data.get("capabilities")
    caps: dict[str, Any] = given if isinstance(given, dict) else {}
    return AgentCard(
        name=data["name"],
        version=str(data.get("version") or ""),
        rpc_url=rpc,
        streaming=caps.get("streaming") is True,
        extension=a2a_extension.declared(caps.get("extensions")),
    )


def _interfaces(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(binding, url, version) of every interface the card lists, v1.0's and 0.3's."""
    found: list[tuple[str, str, str]] = []
    for entry in data.get("supportedInterfaces") or []:
        if isinstance(entry, dict) and isinstance(entry.get("url"), str):
            found.append((str(entry.get("protocolBinding") or ""), entry["url"], str(entry.get("protocolVersion"))))
    if isinstance(data.get("url"), str):  # a 0.3 card
        found.append((str(data.get("preferredTransport") or JSONRPC), data["url"], "0.3"))
        for entry in data.get("additionalInterfaces") or []:
            if isinstance(entry, dict) and isinstance(entry.get("url"), str):
                found.append((str(entry.get("transport") or ""), entry["url"], "0.3"))
    return found


def _bindings(data: dict[str, Any]) -> set[str]:
    return {binding or "?" for binding, _url, _version in _interfaces(data)}


def _jsonrpc_url(data: dict[str, Any]) -> str | None:
    rpc = [(version, url) for binding, url, version in _interfaces(data) if binding.upper() == JSONRPC]
    rpc.sort(key=lambda e: e[0] != "1.0")  # v1.0 first
    return rpc[0][1] if rpc else None
