"""Sessions of a hermes profile that live in its Hermes gateway, made addressable here: all at once
(`sessions import`), or one on demand when an address names a Hermes session id not imported yet."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...addresses import LocalAddress
from ...errors import BackchannelError, EngineError, NotFound, UsageError
from ...home.profiles import Profile
from ...ids import CLIENT_SESSION_ID_RE
from ...records import Session
from ...store import sessions as sessionstore
from ...store.driver import Db
from ..queue.commits import commits
from .directory import Directory

if TYPE_CHECKING:  # the Hermes client loads for a hermes profile's first lookup
    from ...net.hermes import HermesClient


@dataclass(frozen=True)
class Imported:
    """One Hermes session and the Backchannel session that now stands for it."""

    session: Session
    created: bool


LOOKUP_SECONDS = 3.0  # how long an on-demand lookup waits for each Hermes gateway


def hermes_client(
    profile: Profile, secret: Callable[[str], str | None], *, timeout: float | None = None
) -> HermesClient:
    """A client of the Hermes gateway a hermes profile's config names (errors name the profile and the URL)."""
    from ...net.hermes import HermesClient

    model = profile.config.model
    if model.engine != "hermes" or model.base_url is None:
        raise UsageError(f"profile {profile.name!r} does not use the hermes engine (model.engine: {model.engine})")
    url = model.base_url + (f"/p/{model.profile}" if model.profile else "")
    who = f"Hermes gateway {url!r} for profile {profile.name!r}"
    key = secret(model.api_key_env) if model.api_key_env else None
    if not key:
        raise EngineError(f"{who} needs its API server key: set {model.api_key_env or 'model.api_key_env'} in .env")
    return HermesClient(
        model.base_url,
        key,
        who=who,
        error=EngineError,
        timeout=model.timeout_seconds if timeout is None else timeout,
        profile=model.profile,
    )


class Imports:
    """Reads a hermes profile's sessions from its gateway and records each here under its Hermes id."""

    def __init__(self, db: Db, directory: Directory, secret: Callable[[str], str | None]) -> None:
        self.db = db
        self.directory = directory
        self.secret = secret

    @commits
    async def sessions(self, profile_name: str) -> list[Imported]:
        """Every session the Hermes gateway lists, new ones created; the Hermes Bot Chat is the profile's."""
        profile = self.directory.profile(self.directory.check_profile(profile_name))
        client = hermes_client(profile, self.secret)
        try:
            listed = await client.sessions()
        finally:
            await client.aclose()
        out: list[Imported] = []
        for remote in listed:
            existing = await sessionstore.find_by_remote_id(self.db, profile.name, remote.id)
            if existing is not None:
                out.append(Imported(existing, False))
                continue
            if remote.is_bot_chat:
                bot = await self.directory.bot_chat(profile.name)
                mapped = bot.remote_id is None
                if mapped:
                    await sessionstore.set_remote_id(self.db, bot.id, remote.id)
                    bot = await self.directory.session(bot.id)
                out.append(Imported(bot, mapped))
                continue
            out.append(Imported(await self.adopt(profile.name, remote.id, title=remote.title), True))
        return out

    @commits
    async def resolve(self, address: LocalAddress) -> Session:
        """`Directory.resolve`, and a Hermes session id not imported yet imported on demand."""
        profile, session = await self.find(address)
        return session if session is not None else await self.directory.bot_chat(profile)

    async def find(self, address: LocalAddress) -> tuple[str, Session | None]:
        """`Directory.find`; when it names no session here, the session id is asked of the Hermes gateways of
        the hermes profiles (the named one, else all; `LOOKUP_SECONDS` each) and imported from the one that
        knows it. Otherwise the directory's not_found, saying which gateways were asked. The import commits
        with the caller's writes (`resolve`, an agent's send): no commit is waited for when nothing is new."""
        try:
            return await self.directory.find(address)
        except NotFound as missing:
            wanted = address.session_id or address.profile  # a bare token may be a Hermes session id
            if wanted is None or not CLIENT_SESSION_ID_RE.match(wanted):
                raise
            names = (
                [address.profile] if address.session_id is not None and address.profile else self.directory.profiles()
            )
            candidates = [p for p in (self._hermes_profile(n) for n in names) if p is not None]
            if not candidates:
                raise
            known = await asyncio.gather(*(self._knows(p, wanted) for p in candidates))
            for profile, (tip, _) in zip(candidates, known, strict=True):
                if tip is not None:
                    existing = await sessionstore.find_by_remote_id(self.db, profile.name, tip)
                    if existing is not None:
                        return profile.name, existing
                    return profile.name, await self.adopt(profile.name, wanted, remote_tip=tip)
            asked = "; ".join(f"{p.name}: {why}" for p, (_, why) in zip(candidates, known, strict=True))
            raise NotFound(
                f"{missing.message}; nor does a Hermes gateway know it ({asked})", code=missing.code
            ) from None

    def _hermes_profile(self, name: str) -> Profile | None:
        try:
            profile = self.directory.profile(name)
        except BackchannelError:
            return None
        return profile if profile.config.model.engine == "hermes" and profile.config.model.base_url else None

    async def _knows(self, profile: Profile, session_id: str) -> tuple[str | None, str]:
        """The session's live id in the profile's Hermes gateway, or None and why not."""
        from ...net.hermes import SessionMissing

        try:
            client = hermes_client(profile, self.secret, timeout=LOOKUP_SECONDS)
        except BackchannelError as exc:
            return None, exc.message
        try:
            return await client.tip(session_id), "found"
        except SessionMissing:
            return None, "no such session"
        except BackchannelError as exc:
            return None, exc.message
        finally:
            await client.aclose()

    async def adopt(
        self, profile: str, remote_id: str, *, title: str | None = None, remote_tip: str | None = None
    ) -> Session:
        """A new session here for Hermes session `remote_id` (its id too where it is one we accept); its
        turns go to `remote_tip` when Hermes moved the session on (a compression)."""
        own_id = remote_id if CLIENT_SESSION_ID_RE.match(remote_id) else None
        if own_id is not None and await self._taken(own_id):
            own_id = None
        if title and await sessionstore.find_by_title(self.db, profile, title) is not None:
            title = None  # titles are unique per profile here too
        row = await sessionstore.create_session(
            self.db, profile, title=title, source="hermes", session_id=own_id, remote_id=remote_tip or remote_id
        )
        return row

    async def _taken(self, session_id: str) -> bool:
        try:
            await self.directory.session(session_id)
        except NotFound:
            return False
        return True
