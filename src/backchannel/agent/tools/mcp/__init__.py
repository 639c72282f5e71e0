"""MCP servers' tools for Backchannel's agents: a profile's `mcp_servers:`, connected and offered as tools."""

from __future__ import annotations

from .connection import McpConnection
from .toolset import McpTools, named, tool_name

__all__ = ["McpConnection", "McpTools", "named", "tool_name"]
