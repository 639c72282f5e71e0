"""Keys are identities: the home's API_SERVER_KEY is the person's; every other key is one peer's.

A request is from whoever holds its key, whatever its headers say. `Caller` says who that is and what
the key reaches; the HTTP routes ask it before they act. Peer keys are made, listed, rotated and revoked
here (only their hashes are stored: `store.peer_keys`).
"""

from __future__ import annotations

import contextlib
import hmac
import re
import secrets
from dataclasses import dataclass
from fnmatch import fnmatchcase

from ..errors import AuthError, Forbidden, StoreError, UsageError
from ..home import config
from ..home.profiles import DEFAULT_PROFILE
from ..store import peer_keys
from ..store.db import Database
from ..store.peer_keys import PeerKey
from ..store.runs import RunRow
from ..store.sessions import BOT_CHAT_TITLE, SessionRow

PROFILE_PATTERN_RE = re.compile(r"[a-z0-9_*?\[\]-]{1,64}")
KEY_PREFIX = "bcpk_"


@dataclass(frozen=True)
class Caller:
    """Who made a request: the person (`peer` None: everything), or a peer with the profiles its key reaches."""

    peer: str | None = None
    profiles: tuple[str, ...] = ("*",)
    read: bool = True

    @property
    def is_person(self) -> bool:
        return self.peer is None

    @property
    def shown(self) -> str:
        return "the person's key" if self.peer is None else f"the key of peer {self.peer!r}"

    def reaches(self, profile: str) -> bool:
        return self.is_person or any(fnmatchcase(profile, p) for p in self.profiles)

    def sender(self, sender_profile: str | None) -> str:
        """The address a peer's message is from: `peer:NAME`, or `peer:NAME/<its X-Hermes-Sender-Profile>`."""
        assert self.peer is not None
        return f"peer:{self.peer}/{sender_profile}" if sender_profile else f"peer:{self.peer}"

    def sent(self, sender: str) -> bool:
        """Whether a run with this sender was sent with this key."""
        if self.peer is None:
            return True
        return sender == f"peer:{self.peer}" or sender.startswith(f"peer:{self.peer}/")

    # --- what a route asks ----------------------------------------------------------------------

    def require_profile(self, profile: str) -> str:
        if not self.reaches(profile):
            raise Forbidden(f"{self.shown} does not reach profile {profile!r} (it reaches: {', '.join(self.profiles)})")
        return profile

    def require_person(self, what: str) -> None:
        if not self.is_person:
            raise Forbidden(f"{what} takes the person's key; {self.shown} cannot")

    def require_read(self, what: str) -> None:
        if not self.read:
            raise Forbidden(
                f"{what} needs a key that may read; {self.shown} may not "
                f"(`backchannel key create NAME --read` gives one)"
            )

    def require_bot_chat(self, session: SessionRow, *, reading: bool = False) -> SessionRow:
        """A peer's key reaches its profiles' Bot Chats; any other session only to read, with `--read`."""
        self.require_profile(session.profile)
        if self.is_person or session.title == BOT_CHAT_TITLE or (reading and self.read):
            return session
        raise Forbidden(f"{self.shown} reaches only the Bot Chat of {session.profile!r}, not session {session.id!r}")

    def require_run(self, run: RunRow, *, stopping: bool = False) -> RunRow:
        """A peer's key reads and stops the runs it sent; with `--read` it reads the others too."""
        self.require_profile(run.profile)
        if self.sent(run.sender) or (self.read and not stopping):
            return run
        raise Forbidden(f"run {run.id!r} was not sent with {self.shown}")


PERSON = Caller()


class Access:
    """The person's key and the peers' keys of one home: who a key is, and the keys' life cycle."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def identify(self, token: str, *, person_key: str) -> Caller:
        """The caller a bearer token names; AuthError when it is nobody's."""
        token = token.strip()
        is_person = hmac.compare_digest(token.encode("utf-8", "surrogateescape"), person_key.encode())
        if is_person:
            return PERSON
        found = peer_keys.find(self.db, token) if token else None
        if found is None:
            raise AuthError(
                "Invalid API key: send Authorization: Bearer <API_SERVER_KEY or a peer key>", key_sent=bool(token)
            )
        with contextlib.suppress(StoreError):  # a store that cannot be written (a full disk) still knows the key
            peer_keys.stamp_use(self.db, found)
        return Caller(found.name, found.profiles, found.read)

    # --- the keys' life cycle (the CLI) ----------------------------------------------------------

    def create(self, name: str, *, profiles: tuple[str, ...] = (), read: bool = False) -> tuple[PeerKey, str]:
        """A new key for peer `name` reaching `profiles` (default: the default profile); (its record, the key)."""
        config.check_name(name, what="key")
        reach = tuple(dict.fromkeys(check_profile_pattern(p) for p in profiles)) or (DEFAULT_PROFILE,)
        key = new_key()
        return peer_keys.create(self.db, name, key, profiles=reach, read=read), key

    def rotate(self, name: str) -> tuple[PeerKey, str]:
        config.check_name(name, what="key")
        key = new_key()
        return peer_keys.rotate(self.db, name, key), key

    def revoke(self, name: str) -> PeerKey:
        config.check_name(name, what="key")
        return peer_keys.revoke(self.db, name)

    def keys(self) -> list[PeerKey]:
        return peer_keys.all_keys(self.db)

    def get(self, name: str) -> PeerKey | None:
        return next((k for k in self.keys() if k.name == name), None)


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def check_profile_pattern(pattern: str) -> str:
    if not PROFILE_PATTERN_RE.fullmatch(pattern):
        raise UsageError(
            f"invalid profile {pattern!r} for a key: a profile name, or a glob pattern over names such as '*'"
        )
    return pattern
