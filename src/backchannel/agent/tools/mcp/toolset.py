"""The tools of a profile's MCP servers, as Backchannel tools named `<server>__<tool>`.

A tool name the model may see is `^[A-Za-z0-9_-]{1,64}$` (the OpenAI rule): other characters become `_`.
Two tools that would get the same name (one of Backchannel's own, or of another server) are refused
when the servers are loaded, naming both, rather than one hiding the other.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ....errors import ConfigError
from ....home.profiles import McpServerConfig, Profile
from ....outcome import Outcome, answered
from ...engines.base import ToolSpec
from ..base import Tool, ToolContext, ToolFailure

if TYPE_CHECKING:  # the MCP SDK is imported with the first connection: a gateway whose profiles list no MCP server
    import mcp_types as types  # never loads it

    from .connection import McpConnection, Secret

SEPARATOR = "__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
MAX_NAME = 64
MAX_RESULT_CHARS = 100_000


def tool_name(server: str, tool: str) -> str:
    return _UNSAFE.sub("_", f"{server}{SEPARATOR}{tool}")[:MAX_NAME]


class McpTools:
    """Every profile's MCP servers: started on a profile's first turn that offers tools, kept running (and
    started again when one died), closed with the gateway. `tools(profile)` is what a turn adds to its own."""

    def __init__(self, secret: Secret, builtin: Mapping[str, Tool]) -> None:
        self.secret = secret
        self.builtin = builtin
        self._connections: dict[tuple[str, McpServerConfig], McpConnection] = {}
        self._lock = asyncio.Lock()

    async def tools(self, profile: Profile) -> dict[str, Tool]:
        """The tools of `profile`'s MCP servers, started unless they run. A server that cannot start raises
        McpServerError naming it; two tools with one name raise ConfigError naming both."""
        servers = profile.config.mcp_servers
        if not servers:
            return {}
        async with self._lock:
            connections = [self._connection(profile.name, s) for s in servers]
            await self._retire(profile.name, keep=set(servers))
        listed = await _all(connection.ensure() for connection in connections)
        return named(profile, list(zip(connections, listed, strict=True)), self.builtin)

    async def aclose(self) -> None:
        async with self._lock:
            connections = list(self._connections.values())
            self._connections.clear()
        await asyncio.gather(*(c.aclose() for c in connections), return_exceptions=True)

    def _connection(self, profile: str, server: McpServerConfig) -> McpConnection:
        found = self._connections.get((profile, server))
        if found is None:
            from .connection import McpConnection

            found = self._connections[(profile, server)] = McpConnection(profile, server, self.secret)
        return found

    async def _retire(self, profile: str, *, keep: set[McpServerConfig]) -> None:
        """Close the servers a profile's config no longer lists as they are (removed or changed)."""
        gone = [key for key in self._connections if key[0] == profile and key[1] not in keep]
        await asyncio.gather(*(self._connections.pop(key).aclose() for key in gone), return_exceptions=True)


def named(
    profile: Profile, listed: list[tuple[McpConnection, list[types.Tool]]], builtin: Mapping[str, Tool]
) -> dict[str, Tool]:
    """The servers' tools by the names the model sees; ConfigError (mcp_tool_collision) naming both of two
    tools that would have one name."""
    found: dict[str, Tool] = {}
    origin: dict[str, str] = {name: "Backchannel's own tool of that name" for name in builtin}
    for connection, tools in listed:
        for tool in tools:
            name = tool_name(connection.server.name, tool.name)
            here = f"tool {tool.name!r} of MCP server {connection.server.name!r}"
            if name in origin:
                raise ConfigError(
                    f"{str(profile.path / 'config.yaml')!r}: {here} and {origin[name]} would both be named "
                    f"{name!r} for the model; rename a server in mcp_servers or leave one out",
                    code="mcp_tool_collision",
                )
            origin[name] = here
            found[name] = _tool(name, tool, connection)
    return found


async def _all(calls: Any) -> list[list[types.Tool]]:
    """Every call's tools; the first failure raised once all have ended (none left running)."""
    listed: list[list[types.Tool]] = []
    for result in await asyncio.gather(*calls, return_exceptions=True):
        if isinstance(result, BaseException):
            raise result
        listed.append(result)
    return listed


def _tool(name: str, tool: types.Tool, connection: McpConnection) -> Tool:
    from .connection import CallFailed

    schema = dict(tool.input_schema or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    description = tool.description or tool.title or f"{tool.name} (MCP server {connection.server.name})"

    async def handler(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        try:
            result = await connection.call(tool.name, arguments)
        except CallFailed as exc:
            raise ToolFailure(exc.code, exc.message, outcome=exc.outcome) from None
        text = _text(result)
        if result.is_error:  # the tool ran and says it failed
            raise ToolFailure("tool_error", text or f"{tool.name} failed", outcome=Outcome.FAILED)
        out: dict[str, Any] = {"content": text}
        if result.structured_content is not None:
            out["structured"] = result.structured_content
        return answered(out)

    return Tool(ToolSpec(name, description, schema), handler)


def _text(result: types.CallToolResult) -> str:
    import mcp_types as types

    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            parts.append(f"[{block.type}: {block.mime_type}]")
        else:
            parts.append(json.dumps(block.model_dump(mode="json", exclude_none=True), ensure_ascii=False))
    text = "\n".join(parts)
    return text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS] + "\n(cut)"
