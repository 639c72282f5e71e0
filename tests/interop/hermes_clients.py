"""Hermes's outside clients, as their users run them against a gateway: `hermes-agent-api-client` (a typed async
client of capabilities and streamed chat completions; Python 3.13) and `hermes-control-mcp` (an MCP server over a
gateway's runs). `make hermes-clients` (part of `make interop`) installs each pinned version in a venv of its own
under .cache/hermes-clients; API_CLIENT and CONTROL_MCP say what is missing (None when it is there), so tests skip.

    caps, events = api_client(url, key, messages)         # the client's probe_capabilities and stream_chat_events
    control_mcp(url, key, tmp, body)                     # body(call): await call("run_start", lane="x", prompt="hi")
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ROOT / ".cache" / "hermes-clients"
API_CLIENT_PYTHON = CLIENTS / "api-client" / "bin" / "python"
CONTROL_MCP = CLIENTS / "control-mcp" / "bin" / "hermes-control-mcp"
DRIVER = Path(__file__).with_name("hermes_api_client_driver.py")
TIMEOUT = 120.0
LOOPBACK_ONLY = {
    "NO_PROXY": "127.0.0.1,localhost",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
}


def _api_client_missing() -> str | None:
    if not API_CLIENT_PYTHON.is_file():
        return (
            "hermes-agent-api-client is not installed under .cache/hermes-clients: it needs Python 3.13 (pyenv's or "
            "python3.13 on PATH); run `make hermes-clients`"
        )
    return None


API_CLIENT = _api_client_missing()
CONTROL_MCP_MISSING = (
    None if CONTROL_MCP.is_file() else "hermes-control-mcp is not installed: run `make hermes-clients`"
)


def api_client(base_url: str, key: str, request: dict[str, Any], *, session_id: str | None = None) -> dict[str, Any]:
    """One run of the driver in the client's own Python 3.13: its capabilities and the events of one streamed chat
    (or the class and fields of the error it raised), as JSON."""
    args = [str(API_CLIENT_PYTHON), str(DRIVER), base_url, json.dumps(request)]
    if session_id is not None:
        args.append(session_id)
    env = {"PATH": os.environ.get("PATH", ""), "HERMES_TEST_KEY": key, **LOOPBACK_ONLY}
    done = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, env=env, check=False)
    assert done.returncode == 0, done.stderr
    said: dict[str, Any] = json.loads(done.stdout)
    return said


Call = Callable[..., Awaitable[Any]]  # call(tool, **arguments): the tool's JSON result


def control_mcp(
    base_url: str, key: str, scratch: Path, body: Callable[[Call], Awaitable[None]], *, profiles: tuple[str, ...] = ()
) -> None:
    """Run `body` with `hermes-control-mcp serve` over stdio, pointed at the gateway (the key in its env, each named
    profile's in a profiles root as Hermes keeps them), given a function that calls one of its tools."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    root = scratch / "profiles"
    for name in profiles:
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / ".env").write_text(f"API_SERVER_KEY={key}\n")
    args = ["--api-url", base_url, "--state-db", str(scratch / "bridge.db"), "--profiles-root", str(root)]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(scratch), "API_SERVER_KEY": key, **LOOPBACK_ONLY}
    params = StdioServerParameters(command=str(CONTROL_MCP), args=["serve", *args], env=env)

    async def main() -> None:
        with (scratch / "control-mcp.err").open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()

                async def call(tool: str, **arguments: Any) -> Any:
                    result = await asyncio.wait_for(session.call_tool(tool, arguments), TIMEOUT)
                    assert not result.is_error, result
                    (block,) = result.content
                    return json.loads(block.text)

                await body(call)

    asyncio.run(main())


def control_doctor(base_url: str, key: str, scratch: Path) -> subprocess.CompletedProcess[str]:
    """`hermes-control-mcp doctor --json` against the gateway."""
    args = [str(CONTROL_MCP), "doctor", "--json", "--api-url", base_url, "--state-db", str(scratch / "doctor.db")]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(scratch), "API_SERVER_KEY": key, **LOOPBACK_ONLY}
    return subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, env=env, check=False)
