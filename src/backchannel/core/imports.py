"""Sessions of a hermes profile that live in its Hermes gateway, made addressable here (`sessions import`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import EngineError, NotFound, UsageError
from ..home.profiles import Profile
from ..ids import CLIENT_SESSION_ID_RE
from ..net.hermes import HermesClient
from ..store import sessions as sessionstore
from ..store.db import Database
from ..store.sessions import SessionRow
from .commits import commits
from .directory import Directory


@dataclass(frozen=True)
class Imported:
    """One Hermes session and the Backchannel session that now stands for it."""

    session: SessionRow
    created: bool


def hermes_client(profile: Profile, secret: Callable[[str], str | None]) -> HermesClient:
    """A client of the Hermes gateway a hermes profile's config names (errors name the profile and the URL)."""
    model = profile.config.model
    if model.engine != "hermes" or model.base_url is None:
        raise UsageError(f"profile {profile.name!r} does not use the hermes engine (model.engine: {model.engine})")
    url = model.base_url + (f"/p/{model.profile}" if model.profile else "")
    who = f"Hermes gateway {url!r} for profile {profile.name!r}"
    key = secret(model.api_key_env) if model.api_key_env else None
    if not key:
        raise EngineError(f"{who} needs its API server key: set {model.api_key_env or 'model.api_key_env'} in .env")
    return HermesClient(
        model.base_url, key, who=who, error=EngineError, timeout=model.timeout_seconds, profile=model.profile
    )


class Imports:
    """Reads a hermes profile's sessions from its gateway and records each here under its Hermes id."""

    def __init__(self, db: Database, directory: Directory, secret: Callable[[str], str | None]) -> None:
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
            existing = sessionstore.find_by_remote_id(self.db, profile.name, remote.id)
            if existing is not None:
                out.append(Imported(existing, False))
                continue
            if remote.is_bot_chat:
                bot = self.directory.bot_chat(profile.name)
                mapped = bot.remote_id is None
                if mapped:
                    sessionstore.set_remote_id(self.db, bot.id, remote.id)
                    bot = self.directory.session(bot.id)
                out.append(Imported(bot, mapped))
                continue
            out.append(Imported(self.adopt(profile.name, remote.id, title=remote.title), True))
        return out

    def adopt(self, profile: str, remote_id: str, *, title: str | None = None) -> SessionRow:
        """A new session here for Hermes session `remote_id` (its id too where it is one we accept)."""
        own_id = remote_id if CLIENT_SESSION_ID_RE.match(remote_id) else None
        if own_id is not None and self._taken(own_id):
            own_id = None
        if title and sessionstore.find_by_title(self.db, profile, title) is not None:
            title = None  # titles are unique per profile here too
        return sessionstore.create_session(
            self.db, profile, title=title, source="hermes", session_id=own_id, remote_id=remote_id
        )

    def _taken(self, session_id: str) -> bool:
        try:
            self.directory.session(session_id)
        except NotFound:
            return False
        return True
