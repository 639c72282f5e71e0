"""Backchannel's messaging tools served to MCP hosts: `backchannel mcp --as PROFILE` over stdio (with and
without a running gateway) and the gateway's `/mcp` over streamable HTTP, driven by the SDK's own client.

The target profiles run the echo engine (`/sleep` makes a reply slow); the MCP session's sends go
through the delivery service: allowlist, ledger, receipts after the (shortened) wait, wake on reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from conftest import GatewayThread, api_key, free_port, run_cli
from test_messaging import set_messaging

TOOLS = {"send_to_session", "send_to_peer", "check_message", "notify_when_idle", "cancel_message", "list_sessions"}
SHORT_WAIT = "1"
OUTCOMES = {"delivered", "receipt", "held", "refused", "failed", "unknown"}


def setup_home(root: Path) -> None:
    assert run_cli("init").exit_code == 0
    for name in ("research", "builds", "secret"):
        assert run_cli("profile", "create", name).exit_code == 0, name
    set_messaging(root, "research", allow=["builds"])


@contextlib.asynccontextmanager
async def over_stdio(root: Path, *args: str, client: str | None = None) -> AsyncIterator[ClientSession]:
    env = {**os.environ, "BACKCHANNEL_HOME": str(root), "BACKCHANNEL_MCP_MAX_WAIT_SECONDS": SHORT_WAIT}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "backchannel", "mcp", "--as", "research", *args], env=env
    )
    with (root / "mcp-stderr.log").open("a") as errlog:
        info = Implementation(name=client, version="1.0") if client else None  # None: the SDK's own, `mcp`
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, client_info=info) as session,
        ):
            await session.initialize()
            yield session


@contextlib.asynccontextmanager
async def over_http(gateway: GatewayThread, path: str, **headers: str) -> AsyncIterator[ClientSession]:
    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {api_key(gateway.root)}", **headers})
    async with (
        client,
        streamable_http_client(gateway.url + path, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, progress: list[float] | None = None, **args: Any) -> dict[str, Any]:
    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        if progress is not None:
            progress.append(value)

    result = await session.call_tool(tool, args, progress_callback=on_progress)
    assert result.content and result.content[0].type == "text"
    body: dict[str, Any] = json.loads(result.content[0].text)
    assert body["result"] in OUTCOMES, body  # every result says what became of the call, errors too
    assert result.is_error == (body["result"] in ("refused", "failed", "unknown") or "error" in body), body
    return body


async def exercise(session: ClientSession) -> dict[str, Any]:
    """Every tool once, as an MCP host's model would; returns what it saw."""
    listed = await session.list_tools()
    seen: dict[str, Any] = {"tools": {t.name: t for t in listed.tools}}
    seen["reply"] = await call(session, "send_to_session", session_id="builds", message="status?", wait_seconds=20)
    seen["refused"] = await call(session, "send_to_session", session_id="secret", message="let me in")
    progress: list[float] = []
    started = time.monotonic()
    seen["receipt"] = await call(
        session, "send_to_session", progress, session_id="builds", message="/sleep 3\nslow one", wait_seconds=30
    )
    seen["waited"] = time.monotonic() - started
    seen["progress"] = progress
    run_id = seen["receipt"]["run_id"]
    deadline = time.monotonic() + 20
    while True:
        seen["checked"] = await call(session, "check_message", run_id=run_id)
        if seen["checked"].get("state") == "completed" or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    seen["peer"] = await call(session, "send_to_peer", target="nowhere", message="hi")
    queued = await call(session, "send_to_session", session_id="builds", message="/sleep 30\nnever", wait_seconds=0)
    seen["cancelled"] = await call(session, "cancel_message", run_id=queued["run_id"])
    seen["sessions"] = await call(session, "list_sessions")
    return seen


def undescribed(schema: dict[str, Any]) -> list[str]:
    """The parameters of a tool's input schema that carry no description (hosts show them to their person)."""
    return [name for name, prop in schema["properties"].items() if not str(prop.get("description", "")).strip()]


def check(seen: dict[str, Any], root: Path) -> None:
    tools = seen["tools"]
    assert set(tools) == TOOLS
    assert tools["send_to_session"].input_schema["required"] == ["session_id", "message"]
    assert {name: undescribed(tool.input_schema) for name, tool in tools.items()} == {name: [] for name in TOOLS}
    assert seen["reply"]["result"] == "delivered" and seen["reply"]["reply"] == "builds (echo): status?"
    assert seen["refused"]["result"] == "refused" and seen["refused"]["error"]["code"] == "not_allowed"
    receipt = seen["receipt"]
    assert receipt["result"] == "receipt" and receipt["state"] in ("queued", "running"), receipt
    assert seen["waited"] < 2.5, "the send returned its receipt after the capped wait"
    assert seen["progress"], "progress notifications were sent while waiting"
    assert seen["checked"]["state"] == "completed" and "slow one" in seen["checked"]["reply"], seen["checked"]
    assert seen["peer"]["error"]["code"] in ("unknown_peer", "not_allowed"), seen["peer"]
    assert seen["cancelled"]["state"] == "cancelled", seen["cancelled"]
    assert [s["address"] for s in seen["sessions"]["sessions"]] == ["builds"]
    ledger = json.loads(run_cli("ledger", "--json").stdout)
    states = {(row["sender"].split("/")[0], row["target"].split("/")[0], row["state"]) for row in ledger}
    assert {("research", "builds", "completed"), ("research", "secret", "refused:not_allowed")} <= states, states


def test_stdio_without_a_gateway(home: Path) -> None:
    setup_home(home)

    async def main() -> dict[str, Any]:
        async with over_stdio(home) as session:
            return await exercise(session)

    seen = asyncio.run(main())
    check(seen, home)
    sessions = json.loads(run_cli("sessions", "list", "-p", "research", "--json").stdout)
    mcp_sessions = [s for s in sessions if (s.get("title") or "").startswith("MCP: ")]
    assert len(mcp_sessions) == 1, "one session of research for the host connection"
    # the slow reply came back to that session too (wake on reply), as a message of its own
    messages = json.loads(run_cli("sessions", "show", mcp_sessions[0]["id"], "--json").stdout)["messages"]
    assert any("slow one" in m["content"] for m in messages), messages


def test_stdio_through_the_running_gateway_and_a_given_session(home: Path) -> None:
    setup_home(home)
    created = run_cli("chat", "-p", "research", "-q", "hello", "--json")
    session_id = json.loads(created.stdout)["session_id"]
    gateway = GatewayThread(home, free_port()).start()
    try:

        async def main() -> dict[str, Any]:
            async with over_stdio(home, "--session", session_id) as session:
                return await exercise(session)

        seen = asyncio.run(main())
        check(seen, home)
        assert f"run {seen['receipt']['run_id']} completed" in gateway.log(), "the gateway ran the turn"
    finally:
        gateway.close()
    ledger = json.loads(run_cli("ledger", "--json").stdout)
    assert any(row["sender"] == f"research/{session_id}" for row in ledger), "the given session sent them"


def test_stdio_started_with_a_clean_environment_finds_its_home_by_home(home: Path, tmp_path: Path) -> None:
    """As MCP Inspector and the SDK's own client start a server: their default environment (PATH, HOME …),
    no BACKCHANNEL_HOME; `--home` names it in the command line."""
    setup_home(home)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "backchannel", "mcp", "--home", str(home), "--as", "research"],
        env={"HOME": str(tmp_path / "user")},  # merged over the SDK's default environment, which has no BACKCHANNEL_*
    )

    async def main() -> dict[str, Any]:
        with (tmp_path / "mcp-stderr.log").open("a") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                return await call(session, "send_to_session", session_id="builds", message="found me?")

    reply = asyncio.run(main())
    assert reply["result"] == "delivered" and reply["reply"] == "builds (echo): found me?", reply
    assert not (tmp_path / "user" / ".backchannel").exists()


def test_an_mcp_session_is_titled_with_the_hosts_name_and_a_time_a_person_reads(home: Path) -> None:
    setup_home(home)

    async def connect(client: str | None) -> None:
        async with over_stdio(home, client=client) as session:
            await call(session, "list_sessions")

    asyncio.run(connect("Claude Desktop"))
    asyncio.run(connect(None))  # the SDK's own client names no host (`mcp`)
    sessions = json.loads(run_cli("sessions", "list", "-p", "research", "--json").stdout)
    titles = sorted(s["title"] for s in sessions if s.get("title", "").startswith("MCP"))
    when = r"\d{4}-\d\d-\d\d \d\d:\d\d \([0-9a-f]{4}\)"
    assert len(titles) == 2 and re.fullmatch(f"MCP: {when}", titles[0]), titles
    assert re.fullmatch(f"MCP: Claude Desktop {when}", titles[1]), titles


def test_stdio_refuses_an_unknown_profile_or_session_before_serving(home: Path) -> None:
    setup_home(home)
    for args, says in (
        (["--as", "nobody"], "nobody"),
        (["--as", "research", "--session", "20200101_000000_abcdef"], "20200101_000000_abcdef"),
    ):
        result = run_cli("mcp", *args)
        assert result.exit_code == 2, result
        assert says in result.stderr and "Traceback" not in result.stderr


async def unknown_session_and_tool(gateway: GatewayThread, path: str, **headers: str) -> dict[str, dict[str, Any]]:
    """Every tool called as a session that does not exist (X-Backchannel-Session), and a tool that does not."""
    arguments = {
        "send_to_session": {"session_id": "builds", "message": "hi"},
        "send_to_peer": {"target": "nowhere", "message": "hi"},
        "check_message": {"run_id": "run_0123456789abcdef0123456789abcdef"},
        "notify_when_idle": {"session_id": "builds"},
        "cancel_message": {"run_id": "run_0123456789abcdef0123456789abcdef"},
        "list_sessions": {},
    }
    async with over_http(gateway, path, **headers, **{"X-Backchannel-Session": "20200101_000000_abcdef"}) as session:
        seen = {tool: await call(session, tool, **args) for tool, args in arguments.items()}
        seen["no_such_tool"] = await call(session, "no_such_tool")
    return seen


@pytest.mark.parametrize("path", ["/p/research/mcp", "/mcp"])
def test_over_http_at_the_gateway(home: Path, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    setup_home(home)
    monkeypatch.setenv("BACKCHANNEL_MCP_MAX_WAIT_SECONDS", SHORT_WAIT)
    gateway = GatewayThread(home, free_port()).start()
    try:
        headers = {} if path.startswith("/p/") else {"X-Backchannel-Profile": "research"}

        async def main() -> dict[str, Any]:
            async with over_http(gateway, path, **headers) as session:
                return await exercise(session)

        check(asyncio.run(main()), home)
        sessions = json.loads(run_cli("sessions", "list", "-p", "research", "--json").stdout)
        assert len([s for s in sessions if (s.get("title") or "").startswith("MCP: ")]) == 1, "one per MCP session"
        unknown = asyncio.run(unknown_session_and_tool(gateway, path, **headers))
        assert {tool: (r["result"], r["error"]["code"]) for tool, r in unknown.items()} == {
            **{tool: ("refused", "session_not_found") for tool in TOOLS},
            "no_such_tool": ("refused", "unknown_tool"),
        }, unknown
        # A 401 says a Bearer key is asked for, and when one was sent, that it is not valid (RFC 6750)
        r = httpx2.post(gateway.url + path, json={}, headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
        assert r.headers["www-authenticate"].startswith('Bearer realm="backchannel", error="invalid_token"'), r.headers
        r = httpx2.post(gateway.url + path, json={})
        assert r.status_code == 401 and r.headers["www-authenticate"] == 'Bearer realm="backchannel"', r.headers
        r = httpx2.get(gateway.url + "/v1/capabilities", headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]  # every route alike
        r = httpx2.post(gateway.url + "/p/nobody/mcp", json={}, headers=gateway.headers())
        assert r.status_code == 404 and r.json()["error"]["code"] == "profile_not_found"
    finally:
        gateway.close()


def test_a_hosts_send_offers_and_carries_a_deadline(home: Path) -> None:
    """Both sends offer `deadline` (as the CLI's send has --deadline); a host's message queued behind a long turn
    carries it, and past it ends expired, deadline_passed, never started."""
    setup_home(home)
    gateway = GatewayThread(home, free_port()).start()
    try:
        busy = json.loads(run_cli("send", "builds", "/sleep 30\nthe long one", "--wait", "0", "--json").stdout)
        deadline = time.monotonic() + 30
        while json.loads(run_cli("runs", "show", busy["run_id"], "--json").stdout)["state"] != "running":
            assert time.monotonic() < deadline, "builds' long turn did not start"
            time.sleep(0.1)

        async def main() -> tuple[dict[str, Any], dict[str, Any]]:
            async with over_stdio(home) as session:
                tools = {t.name: t.input_schema for t in (await session.list_tools()).tools}
                sent = await call(session, "send_to_session", session_id="builds", message="by when?", deadline=1.5)
                return tools, sent

        before = time.time()
        tools, sent = asyncio.run(main())
        assert all("deadline" in tools[name]["properties"] for name in ("send_to_session", "send_to_peer")), tools
        assert sent["result"] in ("receipt", "failed"), sent  # its wait ends at the deadline at the latest
        deadline = time.monotonic() + 30
        while True:
            [row] = [r for r in json.loads(run_cli("ledger", "--json").stdout) if r["message"] == "by when?"]
            if row["state"] == "expired" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert row["state"] == "expired" and row["started_at"] is None, row
        assert before + 1.5 <= row["deadline"] <= time.time() and "deadline passed" in row["reason"], row
    finally:
        gateway.close()
