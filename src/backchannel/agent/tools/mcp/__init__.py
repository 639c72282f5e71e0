"""MCP servers' tools for Backchannel's agents: a profile's `mcp_servers:`, connected and offered as tools.

The MCP SDK loads with the first connection (`connection.McpConnection`), not with this package."""

from __future__ import annotations

from .toolset import McpTools, named, tool_name

__all__ = ["McpTools", "named", "tool_name"]
