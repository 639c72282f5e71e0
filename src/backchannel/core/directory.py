"""The one path every message takes: resolve the target, check it, record the run, queue it, wait.

The HTTP app and the CLI reach sessions and runs only through here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..addresses import LocalAddress
from ..errors import BodyTooLarge, NotFound, UsageError
from ..home import peers as registry
from ..home.config import NAME_RE
from ..home.profiles import list_profiles
from ..messages import Message
from ..store import ledger
from ..store import runs as runstore
from ..store import sessions as sessionstore
from ..store.runs import RunRow
from ..store.sessions import BOT_CHAT_TITLE, SessionRow
from .queue import Runtime

MAX_MESSAGE_CHARS = 65_536
MAX_KEY_CHARS = 255


@dataclass(frozen=True)
class Delivery:
    run: RunRow
    replayed: bool
    queue_position: int | None
    waited: float


def check_message(message: object) -> str:
    if not isinstance(message, str) or not message.strip():
        raise UsageError("the message is empty or missing", code="missing_message")
    try:
        message.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(f"the message is not valid text: {exc.reason}", code="invalid_payload") from exc
    if len(message) > MAX_MESSAGE_CHARS:
        raise BodyTooLarge(f"the message has {len(message)} characters; at most {MAX_MESSAGE_CHARS} are accepted")
    return message


def check_idempotency_key(key: str | None) -> str | None:
    if key is None:
        return None
    if not 1 <= len(key) <= MAX_KEY_CHARS or any(c in key for c in "\r\n\0"):
        raise UsageError("an idempotency key has 1-255 characters and no line breaks", code="invalid_idempotency_key")
    return key


class Router:
    def __init__(self, runtime: Runtime) -> None:
        from ..agent.tools import memory
        from ..agent.tools import messaging as messaging_tools
        from .delivery import Messenger

        self.runtime = runtime
        self.db = runtime.db
        self.messenger = Messenger(self)
        tools = {memory.TOOL.name: memory.TOOL, **messaging_tools.build(self.messenger)}
        runtime.tools_factory = lambda _runtime, _profile: tools

    def resolve(self, address: LocalAddress) -> SessionRow:
        """The session an address names; a profile alone is its Bot Chat (created on first use)."""
        profile, session = self.find(address)
        return session if session is not None else self.bot_chat(profile)

    def find(self, address: LocalAddress) -> tuple[str, SessionRow | None]:
        """Like `resolve` but creates nothing: (profile, None) for a Bot Chat that does not exist yet."""
        if address.profile is not None and address.session_id is not None:
            self.check_profile(address.profile)
            return address.profile, self.session(address.session_id, profile=address.profile)
        if address.profile is not None:
            if address.profile in list_profiles(self.runtime.root):
                return address.profile, sessionstore.find_by_title(self.db, address.profile, BOT_CHAT_TITLE)
            try:
                found = self.session(address.profile)
                return found.profile, found
            except NotFound:
                known = ", ".join(list_profiles(self.runtime.root)) or "none"
                raise NotFound(
                    f"no profile or session named {address.profile!r} (profiles: {known})", code="not_found"
                ) from None
        assert address.session_id is not None
        try:
            found = self.session(address.session_id)
        except NotFound:
            raise NotFound(f"no session {address.session_id!r} in any profile", code="session_not_found") from None
        return found.profile, found

    def peer_sender(self, *, gateway_id: str | None, profile: str | None) -> str:
        """The address of a sender on another gateway: our name for that gateway when we know it."""
        name = (registry.name_of_gateway(self.runtime.root, gateway_id) if gateway_id else None) or gateway_id
        parts = [p for p in (name, profile) if p]
        return "peer:" + "/".join(parts) if parts else "peer:unknown"

    def ledger(self, a: str | None = None, b: str | None = None, *, limit: int = 100) -> list[ledger.Entry]:
        return ledger.entries(self.db, a, b, limit=limit)

    # --- sessions ------------------------------------------------------------------------------

    def check_profile(self, profile: str) -> str:
        if not NAME_RE.match(profile):
            raise NotFound(f"no profile {profile!r} (not a valid profile name)", code="profile_not_found")
        self.runtime.profile(profile)  # NotFound names the known profiles
        return profile

    def session(self, session_id: str, *, profile: str | None = None) -> SessionRow:
        return sessionstore.get_session(self.db, session_id, profile=profile)

    def sessions(
        self, profile: str | None, *, title: str | None = None, limit: int = 50, offset: int = 0
    ) -> list[SessionRow]:
        return sessionstore.list_sessions(self.db, profile, title=title, limit=limit, offset=offset)

    def create_session(
        self, profile: str, *, title: str | None = None, source: str = "api", session_id: str | None = None
    ) -> tuple[SessionRow, bool]:
        """A new session; asking for the title `Bot Chat` returns the existing one (created=False)."""
        self.check_profile(profile)
        if title is not None and title.strip() == sessionstore.BOT_CHAT_TITLE and session_id is None:
            existing = sessionstore.find_by_title(self.db, profile, sessionstore.BOT_CHAT_TITLE)
            if existing is not None:
                return existing, False
            return sessionstore.bot_chat(self.db, profile), True
        return sessionstore.create_session(self.db, profile, title=title, source=source, session_id=session_id), True

    def bot_chat(self, profile: str) -> SessionRow:
        self.check_profile(profile)
        return sessionstore.bot_chat(self.db, profile)

    def messages(self, session_id: str, *, profile: str | None = None) -> list[Message]:
        self.session(session_id, profile=profile)
        return sessionstore.list_messages(self.db, session_id)

    # --- runs ----------------------------------------------------------------------------------

    def submit(
        self,
        session: SessionRow,
        message: str,
        *,
        sender: str,
        idempotency_key: str | None = None,
        hops: int = 0,
        chain: tuple[str, ...] = (),
        **extra: Any,
    ) -> Delivery:
        """Record and queue; `extra` carries an agent send's provenance (origin, sender session, wake)."""
        check_message(message)
        if sender.startswith("peer:"):
            self.messenger.admit(session, sender=sender, hops=hops, chain=chain, message=message)
        run, created = self.runtime.submit(
            profile=session.profile,
            session_id=session.id,
            message=message,
            sender=sender,
            idempotency_key=check_idempotency_key(idempotency_key),
            hops=hops,
            chain=chain,
            **extra,
        )
        return Delivery(run, not created, self.runtime.queue_position(run), 0.0)

    async def deliver(
        self,
        session: SessionRow,
        message: str,
        *,
        sender: str,
        wait: float | None,
        idempotency_key: str | None = None,
        hops: int = 0,
        chain: tuple[str, ...] = (),
    ) -> Delivery:
        """Submit and wait up to `wait` seconds (None: until it ends) for the reply."""
        started = time.monotonic()
        first = self.submit(session, message, sender=sender, idempotency_key=idempotency_key, hops=hops, chain=chain)
        run = await self.runtime.wait(first.run.id, wait, known=first.run)
        return Delivery(run, first.replayed, self.runtime.queue_position(run), time.monotonic() - started)

    def run(self, run_id: str, *, profile: str | None = None) -> RunRow:
        run = runstore.get(self.db, run_id)
        if profile is not None and run.profile != profile:
            raise NotFound(f"no run {run_id!r} in profile {profile!r}", code="run_not_found")
        return run

    def queue_position(self, run: RunRow) -> int | None:
        return self.runtime.queue_position(run)

    async def stop(self, run_id: str, *, profile: str | None = None) -> RunRow:
        self.run(run_id, profile=profile)
        return await self.runtime.stop(run_id)

    async def wait(self, run_id: str, timeout: float | None, *, known: RunRow | None = None) -> RunRow:
        return await self.runtime.wait(run_id, timeout, known=known)


__all__ = ["Delivery", "Router", "check_idempotency_key", "check_message"]
