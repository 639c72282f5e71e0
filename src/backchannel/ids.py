"""Identifiers: session ids `YYYYMMDD_HHMMSS_<6 hex>`, run ids `run_<32 hex>`, and exchange ids.

An exchange is everything that follows from one person's message, across gateways. Here it is named by the
run of that message (or, for a person's message sent straight to a peer, `xch_<32 hex>`); between gateways
by `<gateway-id>:<that name>`, the gateway where it began first, as the chain's entries are written."""

from __future__ import annotations

import re
import secrets
import time
import uuid

REMOTE = "peer:"  # what every address on another gateway begins with (the grammar is addresses.py's)
BOT_CHAT_TITLE = "Bot Chat"  # the title of the one session of a profile that its name alone addresses
SESSION_ID_RE = re.compile(r"^\d{8}_\d{6}_[0-9a-f]{6}\Z")
# Ids given by API clients (Hermes allows its own); kept to characters safe in paths and addresses.
CLIENT_SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")


def new_session_id(now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d_%H%M%S", time.gmtime(now if now is not None else time.time()))
    return f"{stamp}_{secrets.token_hex(3)}"


def new_run_id() -> str:
    return f"run_{uuid.uuid4().hex}"


def new_exchange_id() -> str:
    """An exchange begun by a person's message that goes straight to a peer (no local run names it)."""
    return f"xch_{uuid.uuid4().hex}"


MAX_EXCHANGE_CHARS = 200
_EXCHANGE_RE = re.compile(r"[!-+\--~]{1,200}")  # visible ASCII but the comma (chains and headers list with it)


def check_exchange(value: str) -> bool:
    """Whether `value` is written as an exchange between gateways is: `<gateway-id>:<name>`."""
    head, colon, tail = value.rpartition(":")
    return bool(_EXCHANGE_RE.fullmatch(value)) and bool(colon and head and tail)


def exchange_on_wire(gateway_id: str, exchange: str) -> str:
    """How an exchange of this gateway's records is named to another gateway: ours get our gateway id first;
    one that began elsewhere keeps the name it came with."""
    return exchange if ":" in exchange else f"{gateway_id}:{exchange}"


def exchange_here(gateway_id: str, named: str) -> str:
    """The exchange a peer names, as this gateway's records hold it: one of ours (our gateway id first) is
    the local name it went out with; one that began elsewhere keeps its full name (never a local run's)."""
    ours = f"{gateway_id}:"
    return named[len(ours) :] if named.startswith(ours) and ":" not in named[len(ours) :] else named


def new_question_id() -> str:
    """A question a turn asks its person (`ask_person`)."""
    return f"q_{uuid.uuid4().hex}"
