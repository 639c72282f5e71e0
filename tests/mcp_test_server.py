"""A small stdio MCP server for the tests (the SDK's MCPServer): echo, a failing tool, a slow one, one that
kills its own process, and its pid. `--odd-names` adds two tools whose names become one (`read.file` and
`read_file`); `--fail-start` exits before answering anything; PIDFILE in the environment gets each pid."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

if "--fail-start" in sys.argv:
    print("this server cannot start: --fail-start", file=sys.stderr)
    sys.exit(3)

if os.environ.get("PIDFILE"):
    with Path(os.environ["PIDFILE"]).open("a") as fh:
        fh.write(f"{os.getpid()}\n")

server = MCPServer("test-server")


@server.tool(description="Say the text back, with a prefix from the environment (GREETING).")
def echo(text: str) -> str:
    return f"{os.environ.get('GREETING', 'echo')}: {text}"


@server.tool(description="Always fails.")
def fail() -> str:
    raise ToolError("this tool always fails")


@server.tool(description="Sleep for some seconds.")
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "slept"


@server.tool(description="Exit the server's process at once.")
def die() -> str:
    os._exit(1)


@server.tool(description="The server's process id.")
def pid() -> str:
    return str(os.getpid())


if "--odd-names" in sys.argv:

    @server.tool(name="read.file", description="odd name one")
    def read_dot() -> str:
        return "dot"

    @server.tool(name="read_file", description="odd name two")
    def read_underscore() -> str:
        return "underscore"


if __name__ == "__main__":
    server.run("stdio")
