"""Doctor's check of a profile's MCP servers: each starts and lists its tools, and no two tools share a name."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ..agent.tools import TOOLBOX
from ..agent.tools.mcp import named
from ..agent.tools.mcp.connection import McpConnection
from ..errors import BackchannelError
from ..home import config
from ..home.profiles import Profile
from .report import Check, fail, ok

TIMEOUT = 10.0  # seconds a server gets to start here, at most (its own connect_timeout when shorter)
SHOWN_TOOLS = 8


async def servers(root: Path, profile: Profile) -> list[Check]:
    """One line per MCP server of `profile`, then a failure if two of their tools would have one name.
    Every server is stopped again before this returns."""

    def secret(name: str) -> str | None:
        return config.secret_value(root, name)

    connections = [
        McpConnection(profile.name, s.model_copy(update={"connect_timeout": min(s.connect_timeout, TIMEOUT)}), secret)
        for s in profile.config.mcp_servers
    ]
    cfg = repr(str(profile.path / "config.yaml"))
    try:
        started = await asyncio.gather(*(c.ensure() for c in connections), return_exceptions=True)
        checks: list[Check] = []
        listed = []
        for connection, tools in zip(connections, started, strict=True):
            check = f"mcp {profile.name}/{connection.server.name}"
            if isinstance(tools, BaseException):
                why = tools.message if isinstance(tools, BackchannelError) else f"{connection.who}: {tools}"
                fix = f"correct mcp_servers.{connection.server.name} in {cfg}, or install the server"
                checks.append(fail(check, why, fix))
            else:
                names = ", ".join(t.name for t in tools[:SHOWN_TOOLS]) + (", …" if len(tools) > SHOWN_TOOLS else "")
                checks.append(ok(check, f"started; {len(tools)} tools: {names or 'none'}"))
                listed.append((connection, tools))
        try:
            named(profile, listed, TOOLBOX)
        except BackchannelError as exc:
            checks.append(fail(f"mcp {profile.name}", exc.message, f"rename a server in mcp_servers of {cfg}"))
        return checks
    finally:
        await asyncio.gather(*(c.aclose() for c in connections), return_exceptions=True)
