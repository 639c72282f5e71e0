"""loopchat: a person's chat on loopback, as a Hermes messaging platform, for Backchannel's interop tests.

A Hermes plugin (copied into `$HERMES_HOME/plugins/loopchat/` by tests/interop/hermes_gateway.py). It
registers a platform adapter under the name `LOOPCHAT_PLATFORM` (default `weixin`: the platform registry is
asked before Hermes's built-in adapters, so this one stands in for weixin's), and Hermes's own gateway runner
drives it as it drives the real one: a message in → the session key `agent:main:weixin:dm:<chat>` → its
authorization, busy guard and turn lease → an agent turn → this adapter's `send` with the reply.

The chat side is a small HTTP server on 127.0.0.1 (the port in `platforms.<name>.extra.port`), JSON:

    POST /in    {"chat_id", "user_id", "user_name"?, "text"}   the person typed this; answered once Hermes took it
    GET  /sent                                                  what Hermes sent to the chats, in order

Written for Hermes 0.19 and 0.22 (`BasePlatformAdapter`'s abstract methods are the same four in both).
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any

DEFAULT_PLATFORM = "weixin"


def _adapter(platform: str) -> type:
    """The adapter class, built when Hermes loads the plugin (its gateway modules exist only in its venv)."""
    from aiohttp import web  # Hermes's API server needs aiohttp: it is in the venv whenever this runs
    from gateway.config import Platform
    from gateway.platforms.base import BasePlatformAdapter, MessageEvent, MessageType, SendResult

    class LoopChat(BasePlatformAdapter):
        """One platform's chats; what Hermes sends is kept in `sent`, for the tests to read over HTTP."""

        def __init__(self, config: Any) -> None:
            super().__init__(config=config, platform=Platform(platform))
            extra = getattr(config, "extra", None) or {}
            self.control_port = int(extra.get("port") or 0)
            self.sent: list[dict[str, Any]] = []
            self._ids = itertools.count(1)
            self._site: Any = None

        async def connect(self, *, is_reconnect: bool = False) -> bool:
            app = web.Application()
            app.router.add_post("/in", self._person_says)
            app.router.add_get("/sent", self._what_was_sent)
            self._site = web.AppRunner(app, access_log=None)  # the tests poll /sent: no line in Hermes's log each time
            await self._site.setup()
            await web.TCPSite(self._site, "127.0.0.1", self.control_port).start()
            self._mark_connected()
            return True

        async def disconnect(self) -> None:
            if self._site is not None:
                await self._site.cleanup()
                self._site = None
            self._mark_disconnected()

        async def send(
            self, chat_id: str, content: str, reply_to: str | None = None, metadata: dict[str, Any] | None = None
        ) -> Any:
            message_id = f"out-{next(self._ids)}"
            self.sent.append({"chat_id": str(chat_id), "content": content, "message_id": message_id, "at": time.time()})
            return SendResult(success=True, message_id=message_id)

        async def get_chat_info(self, chat_id: str) -> dict[str, Any]:
            return {"name": f"chat {chat_id}", "type": "dm"}

        async def _person_says(self, request: Any) -> Any:
            said = await request.json()
            source = self.build_source(
                chat_id=str(said["chat_id"]),
                chat_type="dm",
                user_id=str(said["user_id"]),
                user_name=str(said.get("user_name") or said["user_id"]),
            )
            message_id = f"in-{next(self._ids)}"
            event = MessageEvent(text=said["text"], message_type=MessageType.TEXT, source=source, message_id=message_id)
            await self.handle_message(event)  # from here on it is Hermes's own path, as for any platform
            # 0.22 marks an event its runner took (`_gateway_accepted`); 0.19 has no such mark.
            return web.json_response({"message_id": message_id, "accepted": getattr(event, "_gateway_accepted", None)})

        async def _what_was_sent(self, request: Any) -> Any:
            return web.json_response(self.sent)

    return LoopChat


def register(ctx: Any) -> None:
    """Hermes's plugin entry: the platform, with the allowlist variable Hermes reads for it."""
    platform = os.environ.get("LOOPCHAT_PLATFORM") or DEFAULT_PLATFORM
    adapter = _adapter(platform)
    ctx.register_platform(
        name=platform,
        label=f"{platform} (loopback)",
        adapter_factory=adapter,
        check_fn=lambda: True,
        validate_config=lambda config: True,
        is_connected=lambda config: True,
        allowed_users_env=f"{platform.upper()}_ALLOWED_USERS",
        allow_all_env=f"{platform.upper()}_ALLOW_ALL_USERS",
        max_message_length=4000,
    )
