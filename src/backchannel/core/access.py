"""Keys are identities: the home's API_SERVER_KEY is the person's; every other key is one peer's, or one agent's.

An agent's key (`acts_as` a profile; `hermes connect` makes one for each Hermes home) acts only as that profile's
sessions, through the routes the Hermes plugin calls (their tools and mentions), where the profile's rules apply as
to any of its agents: nothing else, not even what a peer's key may do.

A request is from whoever holds its key, whatever its headers say. `Caller` says who that is and what
the key reaches; the HTTP routes ask it before they act. Peer keys are made, listed, rotated and revoked
here (only their hashes are stored: `store.peer_keys`).

The keys' hashes as last read are kept: while the store is away, a token that is none of them is refused as
any unknown key is (401), so that a made-up key learns nothing of the store, not even that it is away; a
known peer key gets the store's error (which the HTTP door tells only the person in full).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import re
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Literal, TypeVar

from .. import addresses
from ..errors import AgentKeyScope, AuthError, Conflict, Forbidden, KeyRevoked, NotFound, StoreError, UsageError
from ..home import config
from ..home.profiles import DEFAULT_PROFILE
from ..records import PeerKey, Run, Session
from ..store import peer_keys
from ..store.driver import Db

PROFILE_PATTERN_RE = re.compile(r"[a-z0-9_*?\[\]-]{1,64}")
KEY_PREFIX = "bcpk_"
REVOKED_POLL_SECONDS = 0.5  # how soon a stream opened with a key learns that the key was revoked or rotated
T = TypeVar("T")


@dataclass(frozen=True)
class Caller:
    """Who made a request: the person (`peer` None: everything), or a peer with the profiles its key reaches."""

    peer: str | None = None
    profiles: tuple[str, ...] = ("*",)
    read: bool = True
    key_hash: str = field(default="", repr=False, compare=False)  # which key of the peer (a rotation is another)
    metrics: bool = True  # may scrape GET /metrics (the person; a key made with --metrics)
    acts_as: str | None = None  # an agent's key: it acts only as this profile's sessions

    @property
    def is_person(self) -> bool:
        return self.peer is None

    @property
    def shown(self) -> str:
        if self.acts_as is not None:
            return f"the agent key {self.peer!r} of profile {self.acts_as!r}"
        return "the person's key" if self.peer is None else f"the key of peer {self.peer!r}"

    def reaches(self, profile: str) -> bool:
        return self.is_person or any(fnmatchcase(profile, p) for p in self.profiles)

    @property
    def principal(self) -> str:
        """The peer as a whole, `peer:NAME`: what every one of its senders `peer:NAME/<profile>` belongs to."""
        assert self.peer is not None
        return addresses.remote(self.peer)

    def sender(self, sender_profile: str | None) -> str:
        """The address a peer's message is from: `peer:NAME/<its sending profile>` (X-Hermes-Sender-Profile,
        or the A2A extension's `profile`), and `peer:NAME/default` when it names none, so that every rule
        (accept, hold, budgets, the ledger) sees one address for one sender whatever the client sends."""
        return f"{self.principal}/{sender_profile or DEFAULT_PROFILE}"

    def sent(self, sender: str) -> bool:
        """Whether a run with this sender was sent with this key."""
        if self.peer is None:
            return True
        return addresses.is_remote(sender) and addresses.peer_of(sender) == self.peer

    # --- what a route asks ----------------------------------------------------------------------

    def require_profile(self, profile: str) -> str:
        if self.acts_as is not None and profile != self.acts_as:
            raise AgentKeyScope(f"{self.shown} acts only as the sessions of {self.acts_as!r}, not of {profile!r}")
        if not self.reaches(profile):
            raise Forbidden(f"{self.shown} does not reach profile {profile!r} (it reaches: {', '.join(self.profiles)})")
        return profile

    def require_agent_route(self, what: str) -> None:
        """An agent's key calls its sessions' tools and mentions, and nothing else."""
        if self.acts_as is not None:
            raise AgentKeyScope(
                f"{what} is not for {self.shown}: it may only call the tools and mentions of that profile's "
                "sessions (POST /p/<profile>/api/sessions/<id>/tools/<tool> and …/mentions)"
            )

    def require_person(self, what: str) -> None:
        self.require_agent_route(what)
        if not self.is_person:
            raise Forbidden(f"{what} takes the person's key; {self.shown} cannot")

    def require_metrics(self) -> None:
        if not self.metrics:
            raise Forbidden(
                f"GET /metrics takes the person's key or one made to scrape it; {self.shown} is neither "
                "(`backchannel key create NAME --metrics` gives one)"
            )

    def require_read(self, what: str) -> None:
        if not self.read:
            raise Forbidden(
                f"{what} needs a key that may read; {self.shown} may not "
                f"(`backchannel key create NAME --read` gives one)"
            )

    def require_bot_chat(self, session: Session, *, reading: bool = False) -> Session:
        """A peer's key reaches its profiles' Bot Chats; any other session only to read, with `--read`."""
        self.require_profile(session.profile)
        if self.is_person or session.is_bot_chat or (reading and self.read):
            return session
        raise Forbidden(f"{self.shown} reaches only the Bot Chat of {session.profile!r}, not session {session.id!r}")

    def require_run(self, run: Run, *, stopping: bool = False) -> Run:
        """A peer's key reads and stops the runs it sent; with `--read` it reads the others too."""
        self.require_profile(run.profile)
        if self.sent(run.sender) or (self.read and not stopping):
            return run
        raise Forbidden(f"run {run.id!r} was not sent with {self.shown}")


PERSON = Caller()


def _unknown(*, key_sent: bool) -> AuthError:
    return AuthError("Invalid API key: send Authorization: Bearer <API_SERVER_KEY or a peer key>", key_sent=key_sent)


class Access:
    """The person's key and the peers' keys of one home: who a key is, and the keys' life cycle."""

    def __init__(self, db: Db, *, profiles: Callable[[], list[str]]) -> None:
        """`profiles`: the home's profile names now (a key may name only those, or a glob over names)."""
        self.db = db
        self.profiles = profiles
        self._watched: dict[tuple[str, str], set[asyncio.Future[None]]] = {}
        self._watch: asyncio.Task[None] | None = None
        self._known: dict[str, peer_keys.PeerKey] | None = None  # the keys by hash, as last read (None: never)

    async def load(self) -> None:
        """Read the keys (the gateway starts): from now on a token can be told from the keys while the store is
        away."""
        self._known = await peer_keys.by_hash(self.db)

    async def identify(self, token: str, *, person_key: str) -> Caller:
        """The caller a bearer token names; AuthError when it is nobody's. While the store is away: AuthError for
        a token that is none of the keys last read, the store's error for one of them (or when none were read)."""
        token = token.strip()
        is_person = hmac.compare_digest(token.encode("utf-8", "surrogateescape"), person_key.encode())
        if is_person:
            return PERSON
        if not token:
            raise _unknown(key_sent=False)
        try:
            keys = await peer_keys.by_hash(self.db)  # every request reads them all: the cache costs nothing
        except StoreError:
            if self._known is not None and peer_keys.match(self._known, token) is None:
                raise _unknown(key_sent=True) from None
            raise
        self._known = keys
        found = peer_keys.match(keys, token)
        if found is None:
            raise _unknown(key_sent=True)
        with contextlib.suppress(StoreError):  # a store that cannot be written (a full disk) still knows the key
            await peer_keys.stamp_use(self.db, found)
        return Caller(
            found.name,
            found.profiles,
            found.read,
            key_hash=peer_keys.digest(token),
            metrics=found.metrics,
            acts_as=found.acts_as,
        )

    # --- streams opened with a key that is revoked meanwhile -------------------------------------

    async def while_valid(self, who: Caller, events: AsyncIterator[T]) -> AsyncIterator[T]:
        """The events of a stream opened with `who`'s key until they end, or until the key is revoked or rotated
        (within REVOKED_POLL_SECONDS, whether an event is due or not): then KeyRevoked, and `events` is closed.
        The person's key is the home's own and is never revoked here."""
        if who.is_person:
            async for event in events:
                yield event
            return
        revoked = asyncio.ensure_future(self._revoked(who))
        step: asyncio.Future[T] | None = None
        try:
            while True:
                step = asyncio.ensure_future(anext(events))
                await asyncio.wait((step, revoked), return_when=asyncio.FIRST_COMPLETED)
                if not step.done():
                    raise KeyRevoked(
                        f"{who.shown} was revoked or rotated while this stream was open: it ends here (what it"
                        " followed goes on; a key in force may follow it again)"
                    )
                try:
                    event = step.result()
                except StopAsyncIteration:
                    return
                yield event
        finally:  # the key revoked, the events ended, or the stream's reader gone: nothing is left running
            revoked.cancel()
            if step is not None and not step.done():
                step.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await step
            closing = getattr(events, "aclose", None)
            if closing is not None:
                with contextlib.suppress(Exception):
                    await closing()

    async def _revoked(self, who: Caller) -> None:
        """Until `who`'s key is no longer in force; one watch reads the keys for every stream open."""
        assert who.peer is not None
        key = (who.peer, who.key_hash)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._watched.setdefault(key, set()).add(done)
        if self._watch is None or self._watch.done():
            self._watch = asyncio.create_task(self._watch_keys())
        try:
            await done
        finally:
            waiting = self._watched.get(key)
            if waiting is not None:
                waiting.discard(done)
                if not waiting:
                    del self._watched[key]

    async def _watch_keys(self) -> None:
        while self._watched:
            await asyncio.sleep(REVOKED_POLL_SECONDS)
            try:
                live = await peer_keys.live(self.db)
            except StoreError:
                continue  # the store is busy or away: the keys are read again on the next round
            for key, waiting in list(self._watched.items()):
                if key not in live:
                    for done in waiting:
                        if not done.done():
                            done.set_result(None)

    async def aclose(self) -> None:
        """Stop watching keys (the gateway stops)."""
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch

    # --- the keys' life cycle (the CLI) ----------------------------------------------------------

    async def create(
        self, name: str, *, profiles: tuple[str, ...] = (), read: bool = False, metrics: bool = False
    ) -> tuple[PeerKey, str]:
        """A new key for peer `name` reaching `profiles` (default: the default profile; with `metrics` alone,
        none: a key that only scrapes GET /metrics); (its record, the key)."""
        config.check_name(name, what="key")
        reach = tuple(dict.fromkeys(check_profile_pattern(p) for p in profiles)) or (
            () if metrics else (DEFAULT_PROFILE,)
        )
        known = self.profiles()
        for pattern in reach:
            if not any(c in pattern for c in "*?[") and pattern not in known:
                raise NotFound(
                    f"no profile {pattern!r} for the key of {name!r} (profiles: {', '.join(known) or 'none'}); "
                    "nothing was made",
                    code="profile_not_found",
                )
        key = new_key()
        made = await peer_keys.create(self.db, name, key, profiles=reach, read=read, metrics=metrics)
        return made, key

    async def for_agent(
        self, profile: str, *, hermes_home: str, held: str | None, rotate: bool = False
    ) -> tuple[PeerKey, str, Literal["made", "reused", "rotated"]]:
        """The agent key of `profile` for the Hermes home `hermes_home`, whose .env holds `held` now: that one
        again when it is this key in force (and not `rotate`), else a new value (the old one stops at once).
        (its record, the key, which of the three)."""
        if profile not in self.profiles():
            raise NotFound(f"no profile {profile!r} (profiles: {', '.join(self.profiles()) or 'none'})",
                           code="profile_not_found")  # fmt: skip
        name = agent_key_name(profile)
        existing = await self.get(name)
        if existing is None:
            key = new_key()
            made = await peer_keys.create(
                self.db, name, key, profiles=(profile,), read=False, acts_as=profile, hermes_home=hermes_home
            )
            return made, key, "made"
        if existing.acts_as != profile:
            raise Conflict(
                f"a key named {name!r} exists already, and it is not the agent key of profile {profile!r}: "
                f"`backchannel key revoke {name}` first",
                code="key_exists",
            )
        found = peer_keys.match(await peer_keys.by_hash(self.db), held) if held else None
        if found is not None and found.name == name and not rotate:
            return await peer_keys.place(self.db, name, hermes_home), held or "", "reused"
        key = new_key()
        await peer_keys.rotate(self.db, name, key)
        return await peer_keys.place(self.db, name, hermes_home), key, "rotated"

    async def rotate(self, name: str) -> tuple[PeerKey, str]:
        config.check_name(name, what="key")
        key = new_key()
        return await peer_keys.rotate(self.db, name, key), key

    async def revoke(self, name: str) -> PeerKey:
        config.check_name(name, what="key")
        return await peer_keys.revoke(self.db, name)

    async def keys(self) -> list[PeerKey]:
        return [k for k in await peer_keys.all_keys(self.db)]

    async def get(self, name: str) -> PeerKey | None:
        return next((k for k in await self.keys() if k.name == name), None)


def agent_key_name(profile: str) -> str:
    """The name of the agent key of `profile` (as `key list` shows it)."""
    return f"hermes-{profile}"[:64]


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def check_profile_pattern(pattern: str) -> str:
    if not PROFILE_PATTERN_RE.fullmatch(pattern):
        raise UsageError(
            f"invalid profile {pattern!r} for a key: a profile name, or a glob pattern over names such as '*'"
        )
    return pattern
