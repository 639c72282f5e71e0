"""`/mcp` as the app mounts it: the MCP endpoint made, and the MCP SDK imported, on the first request.

A gateway nobody reaches over MCP never loads the SDK. Once made, the endpoint's session manager runs in a
task of its own until the gateway stops (`running`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.types import Receive, Scope, Send

from ..core.gateway import Gateway

if TYPE_CHECKING:
    from .mcp_endpoint import McpEndpoint


class McpRoute:
    """The ASGI app of `/mcp` and `/p/{profile}/mcp`: hands each request to the endpoint, made on the first."""

    def __init__(self, gateway: Gateway, api_key: str) -> None:
        self.gateway = gateway
        self.api_key = api_key
        self._endpoint: McpEndpoint | None = None
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self._endpoint or await self._start()
        await endpoint(scope, receive, send)

    async def _start(self) -> McpEndpoint:
        async with self._lock:
            if self._endpoint is not None:
                return self._endpoint
            from .mcp_endpoint import McpEndpoint

            endpoint = McpEndpoint(self.gateway, self.api_key)
            started = asyncio.Event()

            async def run() -> None:
                async with endpoint.running():
                    started.set()
                    await self._stop.wait()

            self._task = asyncio.create_task(run(), name="backchannel-mcp-sessions")
            waiting = asyncio.ensure_future(started.wait())
            await asyncio.wait({waiting, self._task}, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if self._task.done():  # the session manager could not start: say why, and try again next time
                task, self._task = self._task, None
                task.result()
            self._endpoint = endpoint
            return endpoint

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Around the app's life: the endpoint's session manager (if one was made) stops with it."""
        try:
            yield
        finally:
            self._stop.set()
            if self._task is not None:
                await self._task
