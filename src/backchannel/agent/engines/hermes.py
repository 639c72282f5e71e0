"""The `hermes` engine: a turn is one turn of the Hermes agent in the mapped session of a Hermes gateway.

The Hermes agent answers with its own SOUL.md, memories, skills, tools and the session's history (its
`/chat/stream` loads them), so this engine sends only the turn's framed message; Backchannel's tools reach
that agent through the Backchannel plugin, not through this engine. Session mapping (`SessionLink`):

    a Backchannel session with a known remote id    -> that Hermes session (moved along to its tip)
    the profile's Bot Chat                          -> Hermes's `Bot Chat` (or `Bot Chat #N` tip), else made
    any other session                               -> the Hermes session of the same id, made if missing

A stop cancels the step: the request is abandoned (Hermes cancels its turn when the stream closes) and
the text streamed so far stays with the run.
"""

from __future__ import annotations

from ...errors import EngineError
from ...messages import Message
from ...net.hermes import BOT_CHAT_TITLE, HermesClient, SessionMissing
from .base import ModelRequest, OnDelta, SessionLink


class HermesEngine:
    """Runs turns in the sessions of one Hermes gateway (optionally one of its profiles, `/p/<profile>/`)."""

    name = "hermes"
    uses_context = False  # Hermes keeps the history and the persona itself
    offers_tools = False  # the Hermes agent has its own tools, and ours through the plugin

    def __init__(
        self,
        *,
        profile: str,
        base_url: str,
        api_key: str | None,
        api_key_env: str | None,
        hermes_profile: str | None = None,
        timeout_seconds: float = 120.0,
    ) -> None:
        self.profile = profile
        self.url = base_url.rstrip("/") + (f"/p/{hermes_profile}" if hermes_profile else "")
        self.where = f"Hermes gateway {self.url!r} for profile {profile!r}"
        self._missing_key: str | None = None
        self._client: HermesClient | None = None
        if not api_key:
            variable = api_key_env or "model.api_key_env"
            self._missing_key = (
                f"{self.where} needs its API server key: set {variable} in the home's .env or the environment"
            )
        else:
            self._client = HermesClient(
                base_url,
                api_key,
                who=self.where,
                error=EngineError,
                timeout=timeout_seconds,
                profile=hermes_profile,
            )

    async def step(self, request: ModelRequest, on_delta: OnDelta | None = None) -> Message:
        if self._client is None:
            raise EngineError(self._missing_key or f"{self.where} is not configured")
        link = request.session
        if link is None:
            raise EngineError(f"{self.where}: a hermes turn needs the session it runs in")
        incoming = next((m for m in reversed(request.messages) if m.role == "user"), None)
        if incoming is None:
            raise EngineError(f"{self.where}: nothing to send in session {link.id!r}")
        for attempt in range(2):
            if link.remote_id is None:
                link.remote_id = await self._map(link)
            try:
                reply = await self._client.chat(link.remote_id, incoming.content, on_text=on_delta)
            except SessionMissing:  # gone over there (deleted, or a new Hermes home): map it again, once
                if attempt:
                    raise EngineError(f"{self.where} has no session {link.remote_id!r}") from None
                link.remote_id = None
                continue
            link.remote_id = reply.session_id
            return Message(role="assistant", content=reply.content)
        raise AssertionError("unreachable")

    async def _map(self, link: SessionLink) -> str:
        assert self._client is not None
        if (link.title or "").strip() == BOT_CHAT_TITLE:
            return await self._client.bot_chat(link.id)
        try:
            return await self._client.tip(link.id)
        except SessionMissing:
            return await self._client.create(link.id, title=link.title)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
