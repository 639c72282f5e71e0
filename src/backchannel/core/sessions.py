"""The home's directory as the surfaces see it: profiles, peers, and sessions as views, never as rows.

The HTTP API, the web view, A2A and MCP look sessions up here; the core's own parts use `Directory`, whose
rows this turns into `SessionView`s (`views.session_view`) and nothing else.
"""

from __future__ import annotations

from ..home import peers as registry
from ..home.profiles import Profile
from ..messages import Message
from .delivery.directory import Directory
from .views import SessionView, session_view


class Sessions:
    """Look up and make sessions for a surface: each answer a `SessionView`."""

    def __init__(self, directory: Directory) -> None:
        self._directory = directory

    def check_profile(self, profile: str) -> str:
        return self._directory.check_profile(profile)

    def profile(self, name: str) -> Profile:
        return self._directory.profile(name)

    def profiles(self) -> list[str]:
        return self._directory.profiles()

    def peers(self) -> list[registry.Peer]:
        return self._directory.peers()

    def session(self, session_id: str, *, profile: str | None = None) -> SessionView:
        return session_view(self._directory.session(session_id, profile=profile))

    def sessions(
        self, profile: str | None, *, title: str | None = None, limit: int = 50, offset: int = 0
    ) -> list[SessionView]:
        found = self._directory.sessions(profile, title=title, limit=limit, offset=offset)
        return [session_view(row) for row in found]

    def messages(self, session_id: str, *, profile: str | None = None) -> list[Message]:
        return self._directory.messages(session_id, profile=profile)

    async def create_session(
        self,
        profile: str,
        *,
        title: str | None = None,
        source: str = "api",
        session_id: str | None = None,
        limit: int | None = None,
    ) -> tuple[SessionView, bool]:
        """A new session (created=True), or the profile's Bot Chat when that is the title asked for."""
        row, created = await self._directory.create_session(
            profile, title=title, source=source, session_id=session_id, limit=limit
        )
        return session_view(row), created

    def bot_chat(self, profile: str) -> SessionView:
        """The profile's Bot Chat, created on first use (inside the caller's commit)."""
        return session_view(self._directory.bot_chat(profile))

    async def open_bot_chat(self, profile: str) -> SessionView:
        """The profile's Bot Chat, created (and committed) on first use."""
        return session_view(await self._directory.open_bot_chat(profile))

    def context_session(self, caller: str, profile: str, context_id: str) -> SessionView | None:
        """The session `caller` started in `profile` under an A2A `context_id`; None when it started none."""
        found = self._directory.context_session(caller, profile, context_id)
        return None if found is None else session_view(found)

    def unsaved_session(self, profile: str) -> SessionView:
        """A session of `profile` for a new A2A context, its id chosen but nothing written."""
        return session_view(self._directory.unsaved_session(profile))

    def context_ids(self, caller: str, session_ids: list[str]) -> dict[str, str]:
        """The contextIds `caller` knows these sessions by (only those it started under a contextId)."""
        return self._directory.context_ids(caller, session_ids)
