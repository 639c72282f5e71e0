"""Where messages can go: profiles, sessions and their messages, and addresses resolved to sessions.

Sessions leave here as `views.Session`s, never as the store's rows: the surfaces and the core's own parts
read the same values."""

from __future__ import annotations

import time
from pathlib import Path

from ...addresses import LocalAddress
from ...errors import NotFound
from ...home import peers as registry
from ...home.config import NAME_RE
from ...home.profiles import Profile, list_profiles, load_profile
from ...ids import new_session_id
from ...messages import Message
from ...records import Session
from ...store import contexts as contextstore
from ...store import sessions as sessionstore
from ...store.driver import Db
from ...store.sessions import BOT_CHAT_TITLE
from ..queue.commits import commits
from .known_sessions import SESSIONS_CHANNEL, KnownSessions, bot_chat_key


class Directory:
    """Profiles and sessions of one home, and addresses resolved to them. Reads are plain; writes commit
    before they return."""

    def __init__(self, root: Path, db: Db) -> None:
        self.root = root
        self.db = db
        self._known = KnownSessions()

    async def listen(self) -> None:
        """Hear the other gateways of a shared store tell of a session whose title they changed."""
        await self.db.hear(SESSIONS_CHANNEL, self._known.forget)

    # --- profiles ------------------------------------------------------------------------------

    def profile(self, name: str) -> Profile:
        return load_profile(self.root, name)

    def check_profile(self, profile: str) -> str:
        if not NAME_RE.match(profile):
            raise NotFound(f"no profile {profile!r} (not a valid profile name)", code="profile_not_found")
        self.profile(profile)  # NotFound names the known profiles
        return profile

    def profiles(self) -> list[str]:
        return list_profiles(self.root)

    # --- sessions ------------------------------------------------------------------------------

    async def session(self, session_id: str, *, profile: str | None = None) -> Session:
        return await sessionstore.get_session(self.db, session_id, profile=profile)

    async def known(self, session_id: str, *, profile: str | None = None) -> Session:
        """`session` for a message's admission (its id, profile and title), most often with no read: kept from an
        earlier one (`KnownSessions`), its counters as they were then."""
        found = await self._known.get(session_id, lambda: sessionstore.get_session(self.db, session_id))
        assert found is not None  # get_session raises NotFound
        if profile is not None and found.profile != profile:
            raise NotFound(f"no session {session_id!r} in profile {profile!r}", code="session_not_found")
        return found

    async def sessions(
        self, profile: str | None, *, title: str | None = None, limit: int = 50, offset: int = 0
    ) -> list[Session]:
        found = await sessionstore.list_sessions(self.db, profile, title=title, limit=limit, offset=offset)
        return [row for row in found]

    async def messages(self, session_id: str, *, profile: str | None = None) -> list[Message]:
        await self.session(session_id, profile=profile)
        return await sessionstore.list_messages(self.db, session_id)

    @commits
    async def create_session(
        self,
        profile: str,
        *,
        title: str | None = None,
        source: str = "api",
        session_id: str | None = None,
        limit: int | None = None,
    ) -> tuple[Session, bool]:
        """A new session; asking for the title `Bot Chat` returns the existing one (created=False). With `limit`,
        a profile that has that many sessions already gets no new one (LimitReached, too_many_sessions)."""
        self.check_profile(profile)
        if title is not None and title.strip() == BOT_CHAT_TITLE and session_id is None:
            existing = await sessionstore.find_by_title(self.db, profile, BOT_CHAT_TITLE)
            if existing is not None:
                return existing, False
            return await sessionstore.bot_chat(self.db, profile), True
        row = await sessionstore.create_session(
            self.db, profile, title=title, source=source, session_id=session_id, limit=limit
        )
        return row, True

    @commits
    async def open_bot_chat(self, profile: str) -> Session:
        """The profile's Bot Chat, created (and committed) on first use."""
        return await self.bot_chat(profile)

    async def bot_chat(self, profile: str) -> Session:
        """The profile's Bot Chat, created on first use (inside the caller's commit)."""
        self.check_profile(profile)
        return await sessionstore.bot_chat(self.db, profile)

    @commits
    async def retire_bot_chat(self, profile: str, *, mark: str) -> Session | None:
        """A removed profile's Bot Chat, retitled `Bot Chat (removed <mark>)`: a profile made again by that name
        gets a fresh Bot Chat, and the old one stays readable (by id, in the ledger). None when it had none."""
        found = await sessionstore.retitle(self.db, profile, BOT_CHAT_TITLE, f"{BOT_CHAT_TITLE} (removed {mark})")
        if found is not None:  # no longer the Bot Chat, here and in the other gateways of a shared store
            for key in (found.id, bot_chat_key(profile)):
                self._known.forget(key)
                await self.db.tell(SESSIONS_CHANNEL, key)
        return found

    # --- A2A contexts: a contextId a client chose, per caller -----------------------------------

    async def context_session(self, caller: str, profile: str, context_id: str) -> Session | None:
        """The session `caller` started in `profile` under `context_id`; None when it started none."""
        found = await contextstore.find(self.db, caller=caller, profile=profile, context_id=context_id)
        return None if found is None else found

    def unsaved_session(self, profile: str) -> Session:
        """A session of `profile` for a new context, its id chosen but nothing written (`bind_context` does)."""
        now = time.time()
        return Session(
            id=new_session_id(now),
            profile=profile,
            title=None,
            source="a2a",
            created_at=now,
            updated_at=now,
            message_count=0,
        )

    async def bind_context(
        self, caller: str, profile: str, context_id: str, *, session_id: str, limit: int | None
    ) -> Session:
        """The session `session_id` written and bound to (caller, profile, context_id), inside the caller's commit;
        the one already bound when another request bound it first."""
        return await contextstore.bind(
            self.db, caller=caller, profile=profile, context_id=context_id, session_id=session_id, limit=limit
        )

    async def context_ids(self, caller: str, session_ids: list[str]) -> dict[str, str]:
        """The contextIds `caller` knows these sessions by (only those it started under a contextId)."""
        return await contextstore.of_sessions(self.db, caller=caller, session_ids=session_ids)

    # --- addresses -----------------------------------------------------------------------------

    async def resolve(self, address: LocalAddress) -> Session:
        """The session an address names; a profile alone is its Bot Chat (created on first use)."""
        profile, session = await self.find(address)
        return session if session is not None else await self.bot_chat(profile)

    async def find(self, address: LocalAddress) -> tuple[str, Session | None]:
        """Like `resolve` but creates nothing: (profile, None) for a Bot Chat that does not exist yet."""
        if address.profile is not None and address.session_id is not None:
            self.check_profile(address.profile)
            return address.profile, await self.known(address.session_id, profile=address.profile)
        if address.profile is not None:
            if address.profile in list_profiles(self.root):
                profile = address.profile
                chat = await self._known.get(
                    bot_chat_key(profile), lambda: sessionstore.find_by_title(self.db, profile, BOT_CHAT_TITLE)
                )
                return profile, chat
            try:
                found = await self.known(address.profile)
                return found.profile, found
            except NotFound:
                known = ", ".join(list_profiles(self.root)) or "none"
                raise NotFound(
                    f"no profile or session named {address.profile!r} (profiles: {known})", code="not_found"
                ) from None
        assert address.session_id is not None
        try:
            found = await self.known(address.session_id)
        except NotFound:
            raise NotFound(f"no session {address.session_id!r} in any profile", code="session_not_found") from None
        return found.profile, found

    async def existing(self, address: LocalAddress) -> Session:
        """The session an address names, which must exist: a profile alone is its Bot Chat (not made here)."""
        profile, session = await self.find(address)
        if session is None:
            raise NotFound(
                f"profile {profile!r} has no Bot Chat yet (the first message to {profile!r} makes it)",
                code="session_not_found",
            )
        return session

    async def is_bot_chat(self, session_id: str) -> bool:
        return (await self.session(session_id)).title == BOT_CHAT_TITLE

    def peers(self) -> list[registry.Peer]:
        """The gateways this home knows, by name."""
        return registry.all_peers(self.root)
