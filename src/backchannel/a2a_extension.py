"""The Backchannel extension of A2A: a message's hop count and wait chain, carried across the protocol.

An A2A message says nothing of how many agent-to-agent hops led to it nor of who is waiting on whom, so
the hop limit and the deadlock guard would stop at an A2A door. Between parties that both declare this
extension (the server in its agent card's `capabilities.extensions`, the client in the `A2A-Extensions`
header, `X-A2A-Extensions` in 0.3) the message's `metadata` carries them under the extension's URI:

    {"metadata": {URI: {"hops": 2, "chain": ["peer:alpha/research", "builds"], "profile": "research",
                        "exchange": "gw-1a2b3c4d:run_…", "deadline": "2026-11-30T14:32:00.000Z"}}}

The same meaning as the Hermes dialect's `X-Backchannel-Hops`, `X-Backchannel-Chain` and
`X-Backchannel-Exchange` headers (the exchange: everything that followed from one person's message, named by
the gateway where it began); the optional `profile` is the sending profile, as `X-Hermes-Sender-Profile` (a
peer's message is then from `peer:NAME/<profile>`; without it, `peer:NAME/default`); the optional `deadline`
(RFC 3339) is when its sender stops waiting, as `X-Backchannel-Deadline` (backchannel.deadlines). A task's own
`metadata` carries, under the same URI, its consumed receipt once its model read the message, or null for a task that
ended unread:
`{"metadata": {URI: {"consumed": {"turn": "run_…", "step": 1, "at": 1796660712.8, "digest": "sha256:…"}}}}`.
Plain dicts only: no A2A SDK here, so the client side and the server side share it without loading the SDK.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import deadlines
from .errors import UsageError
from .ids import MAX_EXCHANGE_CHARS, check_exchange

URI = "urn:backchannel:a2a:hops-chain:v1"
HEADER = "A2A-Extensions"  # what the client lists the extensions it activates in (0.3: X-A2A-Extensions)
MAX_HOPS = 1000  # as the HTTP dialect's X-Backchannel-Hops
MAX_CHAIN = 64  # addresses; a longer chain is not a real wait chain
MAX_ADDRESS_CHARS = 200
PROFILE_RE = re.compile(r"[A-Za-z0-9_.@-]{1,64}\Z")  # what X-Hermes-Sender-Profile keeps of a profile name


@dataclass(frozen=True)
class HopsChain:
    """How many agent-to-agent hops led to a message, the addresses waiting on it (oldest first), the
    profile that sent it and the exchange it belongs to (None: not said)."""

    hops: int = 0
    chain: tuple[str, ...] = ()
    profile: str | None = None
    exchange: str | None = None
    deadline: float | None = None  # seconds since the epoch


def card_entry() -> dict[str, object]:
    """The extension as an agent card's `capabilities.extensions` lists it (AgentExtension)."""
    return {
        "uri": URI,
        "description": "Backchannel's hop count and wait chain: message metadata under this URI, "
        '{"hops": int, "chain": [address, ...], "profile": sending profile, "exchange": "<gateway-id>:<id>",'
        ' "deadline": RFC 3339}; the hop limit, the deadlock guard, the budgets and the deadline hold across A2A.'
        " An input-required task's status message"
        ' (its question) carries {"question": {"id", "choices", "default", "expiresAt"}} under it.',
        "required": False,
    }


def metadata(value: HopsChain) -> dict[str, object]:
    """The message metadata entry a client sends (merge it into `Message.metadata`)."""
    entry: dict[str, object] = {"hops": value.hops, "chain": list(value.chain)}
    if value.profile:
        entry["profile"] = value.profile
    if value.exchange:
        entry["exchange"] = value.exchange
    if value.deadline is not None:
        entry["deadline"] = deadlines.wire(value.deadline)
    return {URI: entry}


def consumed_entry(receipt: Mapping[str, Any] | None) -> dict[str, Any]:
    """A task's metadata entry for its consumed receipt (`outcome.Consumed.to_dict`; None: the run ended and no
    model read its message)."""
    return {URI: {"consumed": dict(receipt) if receipt is not None else None}}


def read_consumed(task_metadata: Mapping[str, object] | None) -> tuple[object, bool]:
    """The consumed receipt a task's metadata carries under this extension, and whether it carries one at all."""
    entry = task_metadata.get(URI) if isinstance(task_metadata, Mapping) else None
    if not isinstance(entry, Mapping) or "consumed" not in entry:
        return None, False
    return entry["consumed"], True


def declared(card_extensions: object) -> bool:
    """True when an agent card's `capabilities.extensions` (a list of dicts) names this extension."""
    if not isinstance(card_extensions, list):
        return False
    return any(isinstance(e, Mapping) and e.get("uri") == URI for e in card_extensions)


def activated(header: str | None) -> bool:
    """True when a request's `A2A-Extensions` header (comma-separated URIs) activates this extension."""
    return bool(header) and URI in {part.strip() for part in (header or "").split(",")}


def read(message_metadata: Mapping[str, object] | None) -> HopsChain:
    """The hops and chain a message's metadata carries; none (0, ()) when it carries no entry.

    Raises UsageError naming the field when the entry is there but malformed: a wrong hop count is not
    taken as zero (that would reset the hop limit)."""
    if not message_metadata or URI not in message_metadata:
        return HopsChain()
    entry = message_metadata[URI]
    if not isinstance(entry, Mapping):
        raise UsageError(f"metadata[{URI!r}] must be an object with hops and chain", code="invalid_payload")
    hops = entry.get("hops", 0)
    if isinstance(hops, float) and hops.is_integer():  # JSON numbers through protobuf Struct are doubles
        hops = int(hops)
    if isinstance(hops, bool) or not isinstance(hops, int) or not 0 <= hops <= MAX_HOPS:
        raise UsageError(
            f"metadata[{URI!r}].hops must be an integer from 0 to {MAX_HOPS}, got {hops!r}", code="invalid_payload"
        )
    chain = entry.get("chain", [])
    if (
        not isinstance(chain, list | tuple)
        or len(chain) > MAX_CHAIN
        or not all(isinstance(a, str) and 0 < len(a.strip()) <= MAX_ADDRESS_CHARS for a in chain)
    ):
        raise UsageError(
            f"metadata[{URI!r}].chain must be a list of at most {MAX_CHAIN} addresses", code="invalid_payload"
        )
    profile = entry.get("profile")
    if profile is not None and not (isinstance(profile, str) and PROFILE_RE.match(profile)):
        raise UsageError(
            f"metadata[{URI!r}].profile must be a profile name (letters, digits, _ . @ -, at most 64), got"
            f" {str(profile)[:80]!r}",
            code="invalid_payload",
        )
    exchange = entry.get("exchange")
    if exchange is not None and not (isinstance(exchange, str) and check_exchange(exchange)):
        raise UsageError(
            f"metadata[{URI!r}].exchange must be '<gateway-id>:<id>' (visible ASCII, no commas, at most"
            f" {MAX_EXCHANGE_CHARS}), got {str(exchange)[:80]!r}",
            code="invalid_payload",
        )
    deadline = entry.get("deadline")
    if deadline is not None and not isinstance(deadline, str | int | float):
        raise UsageError(f"metadata[{URI!r}].deadline must be an RFC 3339 time", code="invalid_payload")
    when = None if deadline is None else deadlines.absolute(str(deadline))
    return HopsChain(
        hops=hops, chain=tuple(a.strip() for a in chain), profile=profile, exchange=exchange, deadline=when
    )
