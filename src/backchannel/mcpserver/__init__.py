"""Backchannel's messaging tools served to any MCP host, as one session of a profile: over stdio
(`backchannel mcp --as PROFILE`) and over streamable HTTP at the gateway's `/mcp`.

Every call goes through the gateway's hosted tools (core/hosted.py, as for the Hermes plugin), so the
delivery service's allowlist, hops, deadlock guard, pair budget and ledger apply as for a native agent.
"""

from __future__ import annotations

from .backends import Backend, InProcess, ViaGateway
from .server import Caller, build_server

__all__ = ["Backend", "Caller", "InProcess", "ViaGateway", "build_server"]
