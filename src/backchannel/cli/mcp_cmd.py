"""`backchannel mcp --as PROFILE`: Backchannel's messaging tools for an MCP host (Claude Code, Codex, Cursor,
Hermes …) over stdio, as a session of PROFILE, through the running gateway or, when none runs, its own."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..home import config
from .output import examples

if TYPE_CHECKING:  # the MCP SDK and the core load when the server starts, not for `mcp --help`
    from ..mcpserver import Backend, Caller


@click.command(
    "mcp",
    epilog=examples(
        "backchannel mcp --as research",
        "backchannel mcp --as research --session 20261130_015530_55cf9b",
        "claude mcp add backchannel -- backchannel mcp --home ~/.backchannel --as research",
    ),
)
@click.option("--as", "profile", required=True, metavar="PROFILE", help="The profile whose session the host acts as.")
@click.option(
    "--session",
    "session_id",
    metavar="ID",
    help="Act as this session of PROFILE (default: a new session for each host connection).",
)
def mcp(profile: str, session_id: str | None) -> None:
    """An MCP server on stdio: the messaging tools, as PROFILE.

    \b
    send_to_session, send_to_peer, check_message, notify_when_idle, cancel_message and list_sessions for any
    MCP host.
    Each call is made as a session of PROFILE, under its messaging rules (allow, hops, deadlock guard,
    pair budget; every message in the ledger), through the home's running gateway; when none runs,
    this process runs the turns itself while it serves. A send waits at most 50 s, then returns a
    receipt: the reply comes back to the session, and check_message reads it.
    """
    from ..mcpserver import Caller

    config.require_home(config.home())
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)  # stdout is the MCP host's
    asyncio.run(_serve(config.home(), Caller(config.check_name(profile), session_id)))


async def _serve(root: Path, caller: Caller) -> None:
    """Serve the host through the one client: the running gateway, else this home's in this process, which works
    every session while it serves (a send's target answers, a reply wakes its sender)."""
    from ..mcpserver import ViaGateway
    from ..net.http import quote
    from .connect import gateway_link

    async with gateway_link(root, every=True) as link:
        profile = quote(caller.profile)
        await link.client.request("GET", f"/p/{profile}/v1/capabilities")  # an unknown profile: refused before serving
        if caller.session_id is not None:
            await link.client.request("GET", f"/p/{profile}/api/sessions/{quote(caller.session_id)}")
        await _stdio(ViaGateway(link.client), caller)


async def _stdio(backend: Backend, caller: Caller) -> None:
    from mcp.server.stdio import stdio_server

    from ..mcpserver import build_server

    server = build_server(backend, lambda ctx: caller)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
