"""One MCP server of a profile, connected: started (stdio) or reached (streamable HTTP), its tools listed, kept.

The SDK's transports and session are context managers that must be entered and left in one task, so each
connection runs in a task of its own that holds them until it is closed or the server goes away. Calls
come from the turns' tasks. The server's messages pass through a pump that notices when they end: a
server that died is known to be dead before anything is sent to it, and is started again then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx2
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from ....errors import McpServerError
from ....home.profiles import McpServerConfig
from ....outcome import Outcome

log = logging.getLogger("backchannel.mcp")

Secret = Callable[[str], str | None]
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class CallFailed(Exception):
    """A tool call that got no result: `code` and `message` go back to the model, with the `outcome` it means
    (unknown by default: the server may have acted before it went silent)."""

    def __init__(self, code: str, message: str, *, outcome: Outcome = Outcome.UNKNOWN) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.outcome = outcome


class McpConnection:
    """One running MCP server of one profile: `start` (again after it died), `call`, `aclose`."""

    def __init__(self, profile: str, server: McpServerConfig, secret: Secret) -> None:
        self.profile = profile
        self.server = server
        self.secret = secret
        self.tools: list[types.Tool] = []
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._gone = asyncio.Event()  # the server's messages ended: it exited or closed the connection
        self._lock = asyncio.Lock()

    @property
    def who(self) -> str:
        return f"MCP server {self.server.name!r} of profile {self.profile!r}"

    @property
    def alive(self) -> bool:
        return self._session is not None and not self._gone.is_set()

    async def ensure(self) -> list[types.Tool]:
        """Start the server unless it runs; its tools. Raises McpServerError naming it when it cannot start."""
        async with self._lock:
            if not self.alive:
                await self._restart()
            return self.tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call one tool, started again first if the server died since; an error or timeout is a CallFailed."""
        await self.ensure()
        session = self._session
        assert session is not None
        try:
            return await session.call_tool(tool, arguments, read_timeout_seconds=self.server.timeout)
        except MCPError as exc:
            if exc.error.code == types.REQUEST_TIMEOUT:
                raise CallFailed(
                    "tool_timeout", f"{self.who} did not answer {tool!r} within {self.server.timeout:g} s"
                ) from None
            if exc.error.code == types.CONNECTION_CLOSED or self._gone.is_set():
                await self._close_quietly()
                raise CallFailed(
                    "tool_failed",
                    f"{self.who} closed the connection during {tool!r}: it may or may not have acted; "
                    "it is started again for the next call",
                ) from None
            raise CallFailed(
                "tool_error", f"{self.who} refused {tool!r}: {exc.error.message}", outcome=Outcome.REFUSED
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            await self._close_quietly()
            raise CallFailed(
                "tool_failed", f"{self.who} went away during {tool!r} ({type(exc).__name__}); it is started again"
            ) from None

    async def aclose(self) -> None:
        async with self._lock:
            await self._close_quietly()

    async def _restart(self) -> None:
        await self._close_quietly()
        self._stop = asyncio.Event()
        self._gone = asyncio.Event()
        ready: asyncio.Future[list[types.Tool]] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(ready), name=f"mcp {self.profile}/{self.server.name}")
        try:
            self.tools = await asyncio.wait_for(asyncio.shield(ready), self.server.connect_timeout)
        except TimeoutError:
            await self._close_quietly()
            raise McpServerError(
                f"{self.who} did not start and list its tools within {self.server.connect_timeout:g} s ({self._what()})"
            ) from None
        except McpServerError:
            await self._close_quietly()
            raise

    async def _hold(self, ready: asyncio.Future[list[types.Tool]]) -> None:
        """The connection's own task: enter the transport and the session, list the tools, wait for the end."""
        try:
            async with (
                self._transport() as (read, write),
                _pumped(read, self._gone) as messages,
                ClientSession(messages, write) as session,
            ):
                await session.initialize()
                tools: list[types.Tool] = []
                cursor: str | None = None
                while True:
                    page = await session.list_tools(
                        params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    )
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                self._session = session
                ready.set_result(tools)
                stop = asyncio.create_task(self._stop.wait())
                gone = asyncio.create_task(self._gone.wait())
                try:
                    await asyncio.wait({stop, gone}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    stop.cancel()
                    gone.cancel()
                if self._gone.is_set() and not self._stop.is_set():
                    log.warning("%s ended; it is started again on its next use", self.who)
        except McpServerError as exc:
            if not ready.done():
                ready.set_exception(exc)
        except Exception as exc:  # the SDK's and the process's errors, whatever they are: named, not raised
            if not ready.done():
                ready.set_exception(McpServerError(f"{self.who} could not start ({self._what()}): {_reason(exc)}"))
            else:
                log.warning("%s ended: %s", self.who, _reason(exc))
        finally:
            self._session = None
            self._gone.set()

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        server = self.server
        if server.command is not None:
            params = StdioServerParameters(
                command=server.command,
                args=[self._fill(a) for a in server.args],
                env={k: self._fill(v) for k, v in server.env} or None,
            )
            return stdio_client(params, errlog=_errlog())
        assert server.url is not None
        headers = {k: self._fill(v) for k, v in server.headers}
        return _http(self._fill(server.url), headers, server.timeout)

    def _fill(self, text: str) -> str:
        def one(match: re.Match[str]) -> str:
            value = self.secret(match.group(1))
            if value is None:
                raise McpServerError(
                    f"{self.who}: ${{{match.group(1)}}} is set neither in the home's .env nor in the environment"
                )
            return value

        return _VAR.sub(one, text)

    def _what(self) -> str:
        server = self.server
        return f"url {server.url}" if server.url else f"command {' '.join([server.command or '', *server.args])!r}"

    async def _close_quietly(self) -> None:
        task, self._task = self._task, None
        self._session = None
        if task is None:
            return
        self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), 10)
        except TimeoutError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        except Exception:  # already reported by the task
            pass


@contextlib.asynccontextmanager
async def _http(url: str, headers: dict[str, str], timeout: float) -> AsyncIterator[Any]:
    client = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=max(timeout, 30.0) + 30.0))
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams


@contextlib.asynccontextmanager
async def _pumped(
    source: Any, gone: asyncio.Event
) -> AsyncIterator[MemoryObjectReceiveStream[SessionMessage | Exception]]:
    """The server's messages as they come, and `gone` set when they end."""
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def pump() -> None:
        try:
            async with send:
                async for item in source:
                    await send.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        finally:
            gone.set()

    async with anyio.create_task_group() as group:
        group.start_soon(pump)
        try:
            yield receive
        finally:
            group.cancel_scope.cancel()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_reason(e) for e in exc.exceptions)
    if isinstance(exc, FileNotFoundError):
        return f"no such command ({exc.filename or exc})"
    if isinstance(exc, MCPError):
        return exc.error.message
    return str(exc) or type(exc).__name__


def _errlog() -> Any:
    """Where a stdio server's stderr goes: the gateway's own stderr (its log), or nowhere when it has none."""
    import sys

    try:
        sys.stderr.fileno()
        return sys.stderr
    except (AttributeError, OSError, ValueError):
        return open(os.devnull, "w")  # lives as long as the process given it
