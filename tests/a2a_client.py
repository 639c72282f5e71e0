"""The A2A tests' reference peer: `a2a-sdk`'s own client against a real gateway, and a gateway a module shares."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.server.tasks.task_manager import append_artifact_to_task
from a2a.types import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
)

from backchannel.home import config
from conftest import GatewayProcess, api_key, free_port, run_cli
from gateway_http import in_home

TIMEOUT = 30.0
JSONRPC, REST = "JSONRPC", "HTTP+JSON"
V1 = {"A2A-Version": "1.0"}


def make_key(root: Path, name: str, *args: str) -> str:
    with in_home(root):
        made = run_cli("key", "create", name, *args, "--json")
    assert made.exit_code == 0, made.stderr
    key: str = json.loads(made.stdout)["key"]
    return key


def with_client(
    gw: GatewayProcess,
    body: Callable[[Client], Awaitable[None]],
    *,
    key: str | None = None,
    path: str = "",
    binding: str = JSONRPC,
    streaming: bool = False,
) -> None:
    """Run `body` with an A2A client made from the agent card at `path` (a profile's), with `key`, over `binding`."""

    async def main() -> None:
        token = key or api_key(gw.root)
        async with httpx.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT, trust_env=False
        ) as http:
            config_ = ClientConfig(streaming=streaming, httpx_client=http, supported_protocol_bindings=[binding])
            client = await create_client(f"{gw.url}{path}", config_)
            await body(client)

    asyncio.run(main())


def request(text: str, message_id: str, *, immediately: bool = False, context_id: str = "") -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)], context_id=context_id),
        configuration=SendMessageConfiguration(return_immediately=immediately),
    )


async def send(client: Client, req: SendMessageRequest) -> Task:
    answers = [a async for a in client.send_message(req)]
    assert len(answers) == 1 and answers[0].HasField("task"), answers
    return answers[0].task


async def until(client: Client, task_id: str, done: Callable[[Task], bool], *, within: float = 20.0) -> Task:
    deadline = time.monotonic() + within
    while True:
        task = await client.get_task(GetTaskRequest(id=task_id))
        if done(task) or time.monotonic() > deadline:
            return task
        await asyncio.sleep(0.05)


def concatenated(seen: list[StreamResponse]) -> str:
    """Every text part of every artifact update of a stream, added up as they came (what Hermes's A2A plugin
    and other simple clients show)."""
    return "".join(p.text for e in seen if e.HasField("artifact_update") for p in e.artifact_update.artifact.parts)


def assembled(seen: list[StreamResponse]) -> Task:
    """The stream's Task with its artifact updates applied by the SDK's own rule (append, or replace)."""
    assert seen and seen[0].HasField("task"), seen
    task = Task()
    task.CopyFrom(seen[0].task)
    for event in seen[1:]:
        if event.HasField("artifact_update"):
            append_artifact_to_task(task, event.artifact_update)
    return task


def ledger(gw: GatewayProcess) -> list[dict[str, Any]]:
    r = httpx.get(f"{gw.url}/v1/ledger", headers=gw.headers(), timeout=10, trust_env=False)
    assert r.status_code == 200, r.text
    data: list[dict[str, Any]] = r.json()["data"]
    return data


def rpc(
    gw: GatewayProcess,
    method: str,
    params: dict[str, Any],
    *,
    headers: dict[str, str] | None = None,
    query: str = "",
    key: str | None = None,
) -> dict[str, Any]:
    """A raw JSON-RPC call (no client library): the answer's body."""
    auth = {"Authorization": f"Bearer {key or api_key(gw.root)}"}
    r = httpx.post(
        f"{gw.url}/a2a/jsonrpc{query}",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        headers={**auth, **(headers or {})},
        timeout=TIMEOUT,
        trust_env=False,
    )
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def shared_gateway(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[GatewayProcess]:
    """A started gateway on a home of its own, for the tests of a module that leave its configuration alone."""
    root = tmp_path_factory.mktemp(name) / "home"
    with in_home(root):
        assert run_cli("init").exit_code == 0
    gw = GatewayProcess(root, free_port())
    data = config.load_yaml(config.config_path(root))
    config.write_yaml(config.config_path(root), {**data, "gateway": {**data["gateway"], "port": gw.port}})
    gw.start()
    try:
        yield gw
    finally:
        gw.kill()
