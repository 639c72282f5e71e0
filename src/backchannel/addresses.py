"""Addresses, one grammar for tools, mentions, the CLI and the API.

local   := session-id | profile "/" session-id | profile        (profile alone = its Bot Chat)
remote  := "peer:" peer [ "/" profile [ "/" session-id ] ]
group   := "group:" name                                       (its members, in the home's config.yaml)
mention := "@session:" local | "@peer:" peer [ "/" profile ] | "@group:" name
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import UsageError
from .home.config import DEVICE_NAME_RE, DEVICE_RULE, NAME_RE
from .ids import BOT_CHAT_TITLE as BOT_CHAT_TITLE  # `profile` alone addresses its session of this title
from .ids import CLIENT_SESSION_ID_RE
from .ids import REMOTE as REMOTE  # what every address on another gateway begins with

REMOTE_PROFILE_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}\Z")  # Hermes accepts upper case
# A token runs to the first character no address has; a colon followed by more text continues it
# (`@session:peer:x` is no mention), a colon before a blank or the end is punctuation.
MENTION_RE = re.compile(r"(?<![\w@])@(session|peer|group):([A-Za-z0-9_./-]+)(?![A-Za-z0-9_./-]|:\S)")
GROUP = "group:"  # what a group's address begins with
TRAILING = ".,;:!?)/"


@dataclass(frozen=True)
class LocalAddress:
    """`profile` alone is its Bot Chat; `session_id` alone is looked up across profiles."""

    profile: str | None = None
    session_id: str | None = None

    def __str__(self) -> str:
        return "/".join(p for p in (self.profile, self.session_id) if p)


@dataclass(frozen=True)
class RemoteAddress:
    peer: str
    profile: str | None = None
    session_id: str | None = None

    def __str__(self) -> str:
        return REMOTE + "/".join(p for p in (self.peer, self.profile, self.session_id) if p)


@dataclass(frozen=True)
class GroupAddress:
    """A group of the home's config.yaml: a message to it goes to each of its members."""

    name: str

    def __str__(self) -> str:
        return GROUP + self.name


Address = LocalAddress | RemoteAddress
Target = LocalAddress | RemoteAddress | GroupAddress  # where a message may be sent (a group: to each member)


# One kind of a parsed address, or None: what a check or a parse reads of it. Picking a way by the kind is the
# door's (`core.delivery.door.by_kind`).
def as_local(target: Target) -> LocalAddress | None:
    """A session of this home (a profile: its Bot Chat)."""
    return target if isinstance(target, LocalAddress) else None


def as_remote(target: Target) -> RemoteAddress | None:
    """An agent (or a session) on a peer gateway."""
    return target if isinstance(target, RemoteAddress) else None


def as_group(target: Target) -> GroupAddress | None:
    """A group of the home's config.yaml."""
    return target if isinstance(target, GroupAddress) else None


def is_remote(address: str) -> bool:
    """Whether an address (or a pattern over addresses) names something on another gateway."""
    return address.startswith(REMOTE)


def remote(peer: str, profile: str | None = None) -> str:
    """`peer:NAME`, or `peer:NAME/PROFILE` for one of its profiles."""
    return f"{REMOTE}{peer}/{profile}" if profile else f"{REMOTE}{peer}"


def peer_of(address: str) -> str:
    """The peer's name in a remote address: `x` of `peer:x/p`."""
    return address.removeprefix(REMOTE).split("/", 1)[0]


def peer_path(address: str) -> str:
    """A remote address without its `peer:`: `x/p` of `peer:x/p`, as the `peer` verbs take it and a frame names it."""
    return address.removeprefix(REMOTE)


def profile_of(address: str) -> str | None:
    """The profile (agent) a remote address names: `p` of `peer:x/p` and of `peer:x/p/session`, None of `peer:x`."""
    _, _, rest = peer_path(address).partition("/")
    return rest.split("/", 1)[0] or None


def head(address: str) -> str:
    """An address without its tail: `peer:x` of `peer:x/p`, `p` of `p/session` (a sender as a whole)."""
    return address.split("/", 1)[0]


def remote_names(address: str) -> list[str]:
    """The addresses a remote sender or target answers to: `peer:x/p` also as `peer:x`."""
    first, _, rest = address.partition("/")
    return [first, address] if rest else [address]


def _bad(text: str, why: str) -> UsageError:
    return UsageError(f"invalid address {text!r}: {why}", code="invalid_address")


def _rule(name: str) -> str:
    return DEVICE_RULE if DEVICE_NAME_RE.match(name) else "a-z, 0-9, '-', '_'"


def is_group(address: str) -> bool:
    return address.strip().startswith(GROUP)


def parse_target(text: str) -> Target:
    """An address a message may be sent to: any address, or `group:NAME`."""
    raw = text.strip()
    if raw.startswith(GROUP):
        name = raw.removeprefix(GROUP)
        if not NAME_RE.match(name):
            raise _bad(text, f"{name!r} is not a group name ({_rule(name)})")
        return GroupAddress(name)
    return parse(text)


def parse(text: str) -> Address:
    raw = text.strip()
    if not raw:
        raise _bad(text, "it is empty")
    if raw.startswith(GROUP):
        raise _bad(text, "a group is sent to (send, the messaging tools, @group: mentions), not looked up as one place")
    if is_remote(raw):
        return parse_remote(raw.removeprefix(REMOTE), original=text)
    parts = raw.split("/")
    if len(parts) == 1:
        token = parts[0]
        if NAME_RE.match(token):
            return LocalAddress(profile=token)  # a profile, or failing that a bare session id (resolved later)
        if CLIENT_SESSION_ID_RE.match(token):
            return LocalAddress(session_id=token)
        raise _bad(text, DEVICE_RULE if DEVICE_NAME_RE.match(token) else "expected a profile name or a session id")
    if len(parts) == 2:
        profile, session_id = parts
        if not NAME_RE.match(profile):
            raise _bad(text, f"{profile!r} is not a profile name ({_rule(profile)})")
        if not CLIENT_SESSION_ID_RE.match(session_id):
            raise _bad(text, f"{session_id!r} is not a session id")
        return LocalAddress(profile=profile, session_id=session_id)
    raise _bad(text, "expected session-id, profile, profile/session-id or peer:name[/profile[/session-id]]")


def parse_remote(text: str, *, original: str | None = None) -> RemoteAddress:
    """`peer[/profile[/session-id]]`, as the `peer` CLI verbs take it (without the `peer:` prefix)."""
    shown = original if original is not None else text
    parts = text.strip().split("/")
    if not parts[0] or not NAME_RE.match(parts[0]):
        raise _bad(shown, f"{parts[0]!r} is not a peer name ({_rule(parts[0])})")
    if len(parts) > 3:
        raise _bad(shown, "expected peer[/profile[/session-id]]")
    profile = parts[1] if len(parts) > 1 else None
    session_id = parts[2] if len(parts) > 2 else None
    if profile is not None and not REMOTE_PROFILE_RE.match(profile):
        raise _bad(shown, f"{profile!r} is not a profile name")
    if session_id is not None and not CLIENT_SESSION_ID_RE.match(session_id):
        raise _bad(shown, f"{session_id!r} is not a session id")
    return RemoteAddress(peer=parts[0], profile=profile, session_id=session_id)


def parse_peer(text: str) -> RemoteAddress:
    """A peer target as a tool or the CLI takes it, with or without its `peer:`."""
    return parse_remote(text.removeprefix(REMOTE))


@dataclass(frozen=True)
class Mention:
    token: str  # as written, e.g. "@session:builds"
    address: Target


def mentions(prompt: str) -> tuple[str, list[Mention]]:
    """The prompt without its mention tokens, and the mentions in order (each target once)."""
    found: list[Mention] = []
    seen: set[str] = set()

    def take(match: re.Match[str]) -> str:
        kind, body = match.group(1), match.group(2)
        stripped = body.rstrip(TRAILING)
        tail = body[len(stripped) :]
        try:
            address: Target
            if kind == "group":
                address = parse_target(GROUP + stripped)
            else:
                address = parse(stripped) if kind == "session" else parse_remote(stripped)
        except UsageError:
            return match.group(0)  # not an address: leave the text as it was
        if kind == "session" and isinstance(address, RemoteAddress):
            return match.group(0)
        if kind == "peer" and isinstance(address, RemoteAddress) and address.session_id is not None:
            return match.group(0)
        key = str(address)
        if key not in seen:
            seen.add(key)
            found.append(Mention(token=f"@{kind}:{stripped}", address=address))
        return tail

    text = MENTION_RE.sub(take, prompt)
    return re.sub(r"[ \t]{2,}", " ", text).strip(), found
