"""Ask the person behind an MCP host (issue 42): a `send_to_session` whose run asks (`/ask`, the echo engine's
`ask_person`) is an elicitation to a host that takes them (`elicitation/create` on 2025 protocol versions, the tool
call's `input_required` result on 2026-07-28, both through the official SDK's client), its answer resuming the run
and the call returning its reply; a host that takes none gets a receipt naming the question and how to answer it.

Driven over stdio (`backchannel mcp`, no gateway running) and over streamable HTTP (`/mcp` of a running gateway).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import mcp.client.session as client_session
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from conftest import GatewayThread, api_key, free_port, run_cli
from test_mcp_server import setup_home

ASK = "/ask what colour?"
WAIT = 20


def _elicits(action: str, answer: str = "blue", asked: list[Any] | None = None) -> Any:
    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if asked is not None:
            asked.append(params)
        if action == "accept":
            return types.ElicitResult(action="accept", content={"answer": answer})
        return types.ElicitResult(action=action)  # type: ignore[arg-type]

    return callback


@contextlib.asynccontextmanager
async def stdio(root: Path, mode: str, elicitation: Any) -> AsyncIterator[Client]:
    env = {**os.environ, "BACKCHANNEL_HOME": str(root), "BACKCHANNEL_MCP_MAX_WAIT_SECONDS": str(WAIT)}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "backchannel", "mcp", "--as", "research"], env=env
    )
    async with Client(params, mode=mode, elicitation_callback=elicitation) as client:  # type: ignore[arg-type]
        yield client


async def send(client: Client, message: str = ASK, wait: float = WAIT) -> dict[str, Any]:
    result = await client.call_tool(
        "send_to_session", {"session_id": "builds", "message": message, "wait_seconds": wait}
    )
    assert result.content and result.content[0].type == "text"
    body: dict[str, Any] = json.loads(result.content[0].text)
    return body


MODES = {"2025-06-18": "legacy", "2025-11-25": "legacy", "2026-07-28": "2026-07-28"}


@pytest.mark.parametrize("version", list(MODES))
def test_a_host_with_elicitation_answers_and_gets_the_resumed_runs_reply(
    home: Path, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if version == "2025-06-18":
        monkeypatch.setattr(client_session, "LATEST_HANDSHAKE_VERSION", "2025-06-18")
    setup_home(home)
    asked: list[Any] = []

    async def main() -> tuple[str, dict[str, Any]]:
        async with stdio(home, MODES[version], _elicits("accept", asked=asked)) as client:
            return str(client.session.protocol_version), await send(client)

    negotiated, reply = asyncio.run(main())
    assert negotiated == version
    assert reply["result"] == "delivered" and reply["state"] == "completed", reply
    assert "blue" in reply["reply"], reply
    assert len(asked) == 1 and "what colour?" in asked[0].message, asked
    question = json.loads(run_cli("ask", "list", "--state", "answered", "--json").stdout)
    assert [(q["answer"], q["answered_by"], q["run_id"]) for q in question] == [
        ("blue", "human:mcp", reply["run_id"])
    ], question


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
def test_a_host_that_declines_lets_the_run_go_on_told_so(home: Path, version: str) -> None:
    setup_home(home)

    async def main() -> dict[str, Any]:
        async with stdio(home, MODES[version], _elicits("decline")) as client:
            return await send(client)

    reply = asyncio.run(main())
    assert reply["result"] == "delivered" and reply["state"] == "completed", reply
    messages = json.loads(run_cli("sessions", "show", reply["session_id"], "--json").stdout)["messages"]
    assert any("declined to answer your question" in m["content"] for m in messages), messages  # its turn told so
    closed = json.loads(run_cli("ask", "list", "--state", "cancelled", "--json").stdout)
    assert [(q["run_id"], q["answered_by"]) for q in closed] == [(reply["run_id"], "human:mcp")], closed


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
def test_a_host_without_elicitation_gets_a_receipt_naming_the_question(home: Path, version: str) -> None:
    setup_home(home)

    async def main() -> dict[str, Any]:
        async with stdio(home, MODES[version], None) as client:
            return await send(client, wait=1)

    receipt = asyncio.run(main())
    assert receipt["result"] == "receipt" and receipt["state"] == "input_required", receipt
    (question,) = json.loads(run_cli("ask", "list", "--json").stdout)
    assert receipt["question"]["id"] == question["id"] and receipt["question"]["question"] == "what colour?"
    assert f"backchannel ask answer {question['id']} TEXT" in receipt["note"], receipt
    assert question["run_id"] == receipt["run_id"] and question["asker"].startswith("research/"), question


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_over_http_a_host_answers_through_elicitation(home: Path, mode: str) -> None:
    setup_home(home)
    gateway = GatewayThread(home, free_port()).start()
    try:

        async def main() -> dict[str, Any]:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {api_key(home)}"}, timeout=60)
            transport = streamable_http_client(gateway.url + "/p/research/mcp", http_client=http)
            async with http, Client(transport, mode=mode, elicitation_callback=_elicits("accept")) as client:  # type: ignore[arg-type]
                return await send(client)

        reply = asyncio.run(main())
    finally:
        gateway.close()
    assert reply["result"] == "delivered" and "blue" in reply["reply"], reply
