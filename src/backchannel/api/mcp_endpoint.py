"""`/mcp` and `/p/{profile}/mcp`: the MCP server over streamable HTTP, in the gateway, with the person's key.

The profile is the path's, else the `X-Backchannel-Profile` header's, else `default`. Each MCP session
(the host's `Mcp-Session-Id`) acts as a session of its own, made on its first call, unless the
`X-Backchannel-Session` header names one.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from ..core.gateway import Gateway
from ..home.profiles import DEFAULT_PROFILE
from ..mcpserver import Caller, InProcess, build_server
from .http import bearer

PROFILE_HEADER = "x-backchannel-profile"
SESSION_HEADER = "x-backchannel-session"
MAX_CALLERS = 1000  # host connections remembered (their sessions stay in the store whatever happens)


class McpEndpoint:
    """The ASGI endpoint of both routes: checks the key and the profile, then hands over to the SDK."""

    def __init__(self, gateway: Gateway, api_key: str) -> None:
        self.gateway = gateway
        self.api_key = api_key
        self._callers: OrderedDict[tuple[str, str, str], Caller] = OrderedDict()
        self.manager = StreamableHTTPSessionManager(
            app=build_server(InProcess(gateway), self._caller),
            # The key authenticates every request; a page in a browser cannot send it.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        # Acting as one of our sessions: the person's key only (a peer's key is 401 or 403 here).
        (await self.gateway.keys.identify(bearer(request), person_key=self.api_key)).require_person("MCP at /mcp")
        self.gateway.roster.check_profile(_profile(request))
        await self.manager.handle_request(scope, receive, send)

    def _caller(self, ctx: ServerRequestContext[Any, Any]) -> Caller:
        request = ctx.request
        assert isinstance(request, Request)
        profile = _profile(request)
        fixed = request.headers.get(SESSION_HEADER, "")
        key = (request.headers.get("mcp-session-id", ""), profile, fixed)
        caller = self._callers.get(key)
        if caller is None:
            caller = self._callers[key] = Caller(profile, fixed or None)
            while len(self._callers) > MAX_CALLERS:
                self._callers.popitem(last=False)
        self._callers.move_to_end(key)
        return caller


def _profile(request: Request) -> str:
    return str(request.path_params.get("profile") or request.headers.get(PROFILE_HEADER) or DEFAULT_PROFILE)
