"""Every profile an A2A agent: a real gateway process, called through `a2a-sdk`'s own client over JSON-RPC.

The card is public; SendMessage (blocking and returnImmediately), GetTask and CancelTask are the runs of
the delivery service, as the key's caller: the person's key, or a peer's (`backchannel key create`).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

from conftest import GatewayProcess, api_key, run_cli
from gateway_http import set_messaging

TIMEOUT = 30.0


def make_key(name: str, *args: str) -> str:
    made = run_cli("key", "create", name, *args, "--json")
    assert made.exit_code == 0, made.stderr
    key: str = json.loads(made.stdout)["key"]
    return key


def with_client(
    gw: GatewayProcess, body: Callable[[Client], Awaitable[None]], *, key: str | None = None, path: str = ""
) -> None:
    """Run `body` with an A2A client made from the agent card at `path` (a profile's), with `key`."""

    async def main() -> None:
        token = key or api_key(gw.root)
        async with httpx.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT, trust_env=False
        ) as http:
            client = await create_client(f"{gw.url}{path}", ClientConfig(streaming=False, httpx_client=http))
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


def ledger(gw: GatewayProcess) -> list[dict[str, Any]]:
    r = httpx.get(f"{gw.url}/v1/ledger", headers=gw.headers(), timeout=10, trust_env=False)
    assert r.status_code == 200, r.text
    data: list[dict[str, Any]] = r.json()["data"]
    return data


def test_the_agent_card_is_public_and_names_the_profile_its_soul_and_skills(gateway: GatewayProcess) -> None:
    assert run_cli("profile", "create", "research").exit_code == 0
    skill = gateway.root / "profiles" / "research" / "skills" / "summaries" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: summaries\ndescription: Summarise a paper in five lines.\n---\nSteps.\n")
    (gateway.root / "profiles" / "research" / "SOUL.md").write_text(
        "# Research\n\nYou read papers.\nCarefully.\n\nMore."
    )
    card = httpx.get(f"{gateway.url}/p/research/.well-known/agent-card.json", trust_env=False).json()
    assert card["name"] == "research"
    assert card["description"] == "You read papers. Carefully."
    assert card["skills"] == [
        {
            "id": "summaries",
            "name": "summaries",
            "description": "Summarise a paper in five lines.",
            "tags": ["summaries"],
        }
    ]
    assert card["supportedInterfaces"] == [
        {"url": f"{gateway.url}/p/research/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    assert card["capabilities"]["pushNotifications"] is False
    assert [e["uri"] for e in card["capabilities"]["extensions"]] == ["urn:backchannel:a2a:hops-chain:v1"]
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    root = httpx.get(f"{gateway.url}/.well-known/agent-card.json", trust_env=False).json()
    assert root["name"] == "default" and root["supportedInterfaces"][0]["url"] == f"{gateway.url}/a2a/jsonrpc"
    missing = httpx.get(f"{gateway.url}/p/nobody/.well-known/agent-card.json", trust_env=False)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "profile_not_found", missing.text


def test_send_blocking_answers_with_the_completed_task(gateway: GatewayProcess) -> None:
    async def body(client: Client) -> None:
        task = await send(client, request("hello over A2A", "m-1"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        assert task.id.startswith("run_")
        assert task.artifacts[0].parts[0].text == "default (echo): hello over A2A"
        assert task.status.message.parts[0].text == "default (echo): hello over A2A"
        assert [m.role for m in task.history] == [Role.ROLE_USER, Role.ROLE_AGENT]
        assert task.history[0].message_id == "m-1"
        # the context is the session: no contextId was the profile's Bot Chat, and naming it stays there
        again = await send(client, request("and again", "m-2", context_id=task.context_id))
        assert again.context_id == task.context_id and again.id != task.id

    with_client(gateway, body)
    sent = [e for e in ledger(gateway) if e["message"] == "hello over A2A"]
    assert [e["sender"] for e in sent] == ["human:a2a"]


def test_send_immediately_gives_the_task_at_once_then_get_task_until_completed(gateway: GatewayProcess) -> None:
    async def body(client: Client) -> None:
        started = time.monotonic()
        task = await send(client, request("/sleep 1\nslow hello", "m-slow", immediately=True))
        assert time.monotonic() - started < 1.0
        assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING), task
        done = await until(client, task.id, lambda t: t.status.state == TaskState.TASK_STATE_COMPLETED)
        assert done.status.state == TaskState.TASK_STATE_COMPLETED, done
        assert done.artifacts[0].parts[0].text == "default (echo): slow hello"

    with_client(gateway, body)


def test_a_replay_by_message_id_returns_the_same_task_and_runs_once(gateway: GatewayProcess) -> None:
    async def body(client: Client) -> None:
        first = await send(client, request("only once", "m-once"))
        replay = await send(client, request("only once", "m-once"))
        assert replay.id == first.id and replay.status.state == TaskState.TASK_STATE_COMPLETED

    with_client(gateway, body)
    assert len([e for e in ledger(gateway) if e["message"] == "only once"]) == 1


def test_cancel_stops_a_slow_task(gateway: GatewayProcess) -> None:
    async def body(client: Client) -> None:
        task = await send(client, request("/sleep 30\ntoo slow", "m-cancel", immediately=True))
        await until(client, task.id, lambda t: t.status.state == TaskState.TASK_STATE_WORKING)
        started = time.monotonic()
        cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED, cancelled
        assert time.monotonic() - started < 5
        seen = await client.get_task(GetTaskRequest(id=task.id))
        assert seen.status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError, match="ended already"):
            await client.cancel_task(CancelTaskRequest(id=task.id))

    with_client(gateway, body)


def test_a_peer_key_the_profile_does_not_accept_is_rejected_with_the_refusal_code(gateway: GatewayProcess) -> None:
    key = make_key("spark")
    set_messaging(gateway.root, "default", accept=["peer:someone-else"])

    async def body(client: Client) -> None:
        task = await send(client, request("let me in", "m-peer"))
        assert task.status.state == TaskState.TASK_STATE_REJECTED, task
        assert task.status.message.metadata["code"] == "not_allowed"
        with pytest.raises(TaskNotFoundError):  # a refused message is no run
            await client.get_task(GetTaskRequest(id=task.id))

    with_client(gateway, body, key=key)
    assert not [e for e in ledger(gateway) if e["message"] == "let me in" and e.get("run_id")]


def test_a_peer_keys_message_is_framed_as_that_peers(gateway: GatewayProcess) -> None:
    key = make_key("spark")
    sessions: list[str] = []

    async def body(client: Client) -> None:
        task = await send(client, request("hello from spark", "m-spark"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        sessions.append(task.context_id)

    with_client(gateway, body, key=key)
    assert [e["sender"] for e in ledger(gateway) if e["message"] == "hello from spark"] == ["peer:spark"]
    r = httpx.get(f"{gateway.url}/api/sessions/{sessions[0]}/messages", headers=gateway.headers(), trust_env=False)
    users = [m["content"] for m in r.json()["data"] if m["role"] == "user"]
    assert len(users) == 1 and users[0].startswith("[Message from peer spark"), users


def test_another_callers_task_is_not_found(gateway: GatewayProcess) -> None:
    key = make_key("spark")
    ids: list[str] = []

    async def as_person(client: Client) -> None:
        ids.append((await send(client, request("the person's", "m-mine"))).id)

    async def as_peer(client: Client) -> None:
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=ids[0]))
        with pytest.raises(TaskNotFoundError):
            await client.cancel_task(CancelTaskRequest(id=ids[0]))
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="run_nothing"))

    with_client(gateway, as_person)
    with_client(gateway, as_peer, key=key)


def test_no_key_is_401_and_changes_nothing(gateway: GatewayProcess) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m-nokey", "role": "ROLE_USER", "parts": [{"text": "who am I"}]}},
    }
    for path in ("/a2a/jsonrpc", "/p/default/a2a/jsonrpc"):
        r = httpx.post(f"{gateway.url}{path}", json=body, headers={"A2A-Version": "1.0"}, trust_env=False)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", r.text
    assert not [e for e in ledger(gateway) if e["message"] == "who am I"]


def test_a_held_message_is_a_task_that_waits_with_a_status_message(gateway: GatewayProcess) -> None:
    key = make_key("spark")
    set_messaging(gateway.root, "default", hold=["peer:*"])

    async def body(client: Client) -> None:
        task = await send(client, request("may I", "m-held"))  # blocking, yet answered at once: a person decides
        assert task.status.state == TaskState.TASK_STATE_SUBMITTED, task
        assert task.status.message.metadata["code"] == "held"
        assert "approve" in task.status.message.parts[0].text
        seen = await client.get_task(GetTaskRequest(id=task.id))
        assert seen.status.state == TaskState.TASK_STATE_SUBMITTED
        with pytest.raises(TaskNotCancelableError, match="held for the person"):
            await client.cancel_task(CancelTaskRequest(id=task.id))

    with_client(gateway, body, key=key)


def test_bad_input_gets_a_clear_error_and_changes_nothing(gateway: GatewayProcess) -> None:
    def call(params: dict[str, Any]) -> dict[str, Any]:
        r = httpx.post(
            f"{gateway.url}/a2a/jsonrpc",
            json={"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": params},
            headers=gateway.headers(**{"A2A-Version": "1.0"}),
            trust_env=False,
            timeout=10,
        )
        assert r.status_code == 200, r.text
        error: dict[str, Any] = r.json()["error"]
        return error

    def message(**fields: Any) -> dict[str, Any]:
        return {"message": {"messageId": "m-bad", "role": "ROLE_USER", "parts": [{"text": "bad one"}], **fields}}

    unknown = call(message(contextId="20260101_000000_abcdef"))
    assert unknown["code"] == -32602 and "no session '20260101_000000_abcdef'" in unknown["message"], unknown
    follow_up = call(message(taskId="run_x"))
    assert follow_up["code"] == -32004 and "continuing task 'run_x'" in follow_up["message"], follow_up
    data = call({"message": {"messageId": "m-data", "role": "ROLE_USER", "parts": [{"data": {"a": 1}}]}})
    assert data["code"] == -32005 and "only text parts" in data["message"], data
    empty = call({"message": {"messageId": "m-empty", "role": "ROLE_USER", "parts": [{"text": "  "}]}})
    assert empty["code"] == -32602 and empty["data"][0]["metadata"] == {"code": "missing_message"}, empty
    assert not [e for e in ledger(gateway) if e.get("run_id")]


def test_the_sdk_is_imported_only_when_a2a_is_asked_for() -> None:
    probe = "import sys, backchannel.api.app; print(any(m == 'a2a' or m.startswith('a2a.') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out


def test_a_body_over_the_limit_is_413_and_changes_nothing(gateway: GatewayProcess) -> None:
    text = "x" * 1_100_000
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m-big", "role": "ROLE_USER", "parts": [{"text": text}]}},
    }
    r = httpx.post(
        f"{gateway.url}/a2a/jsonrpc",
        json=body,
        headers=gateway.headers(**{"A2A-Version": "1.0"}),
        trust_env=False,
        timeout=10,
    )
    assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large", r.text
    assert not [e for e in ledger(gateway) if e.get("run_id")]
    garbled = httpx.post(
        f"{gateway.url}/a2a/jsonrpc", content=b"{not json", headers=gateway.headers(), trust_env=False, timeout=10
    )
    assert garbled.status_code == 200 and garbled.json()["error"]["code"] == -32700, garbled.text
