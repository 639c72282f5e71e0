"""Hermes's outside clients against a Backchannel gateway, every call they offer (issue 39 item 7): software nobody
here wrote, pinned, each in its own venv (`make hermes-clients`, part of `make interop`).

- `hermes-agent-api-client` 0.3.3 (Python 3.13): `probe_capabilities` (it checks `platform: hermes-agent`, `model`,
  `auth`, the chat-completion flags) and `stream_chat_events` (strict OpenAI chunks, `hermes.tool.progress`,
  `[DONE]`, LF lines), at the root and under /p/<profile>, in a new session and in one it names.
- `hermes-control-mcp` 0.2.0b5: its `doctor`, and every durable tool of its MCP server (health with models and
  capabilities, run start/status/wait/events/steer/stop, session history), for the default and a named profile.
  Its `live_*` tools drive Hermes's TUI WebSocket runtime, which no API server (Hermes's or ours) serves: they
  answer that the live tier is not configured, as they do against Hermes's own API server.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hermes_clients import API_CLIENT, CONTROL_MCP_MISSING, Call, api_client, control_doctor, control_mcp

from conftest import GatewayProcess, api_key, free_port, run_cli

pytestmark = pytest.mark.interop
# `make interop` sets BACKCHANNEL_REQUIRE_HERMES_*: there a missing client is a failure, not a skip (the API client
# only where a Python 3.13 was found to install it)
needs_api_client = pytest.mark.skipif(
    API_CLIENT is not None and not os.environ.get("BACKCHANNEL_REQUIRE_HERMES_API_CLIENT"), reason=str(API_CLIENT)
)
needs_control_mcp = pytest.mark.skipif(
    CONTROL_MCP_MISSING is not None and not os.environ.get("BACKCHANNEL_REQUIRE_HERMES_CONTROL_MCP"),
    reason=str(CONTROL_MCP_MISSING),
)
MEMORY_TOOL = '/tool memory {"action": "add", "target": "memory", "content": "x"}'


@pytest.fixture
def gw(initialised: Path) -> Iterator[GatewayProcess]:
    assert run_cli("profile", "create", "research").exit_code == 0
    gateway = GatewayProcess(initialised, free_port()).start()
    try:
        yield gateway
    finally:
        gateway.stop()


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], "stream": True}


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["text"] for e in events if e["kind"] == "delta")


@needs_api_client
def test_hermes_agent_api_client_probes_and_streams_every_way_it_can(gw: GatewayProcess) -> None:
    key = api_key(gw.root)
    said = api_client(gw.url, key, user("hello there"))
    assert "error" not in said, said
    caps = said["capabilities"]
    assert (caps["platform"], caps["model"], caps["chat_completions"], caps["chat_completions_streaming"]) == (
        "hermes-agent",
        "default",
        True,
        True,
    )
    assert text_of(said["events"]) == "default (echo): hello there"
    assert said["events"][-1] == {"kind": "terminal", "outcome": "success", "partial": False, "reason": None}
    assert any(e["kind"] == "usage" for e in said["events"])

    made = httpx.post(f"{gw.url}/p/research/api/sessions", json={"title": "from the client"}, headers=gw.headers())
    session_id = made.json()["session"]["id"]
    named = api_client(f"{gw.url}/p/research", key, user(f"{MEMORY_TOOL}\nremembered"), session_id=session_id)
    assert named["capabilities"]["model"] == "research", named
    tools = [e for e in named["events"] if e["kind"] == "tool"]
    assert [(t["tool"], t["status"]) for t in tools] == [("memory", "running"), ("memory", "completed")]
    assert tools[0]["id"] == tools[1]["id"] and "remembered" in text_of(named["events"])
    messages = httpx.get(f"{gw.url}/p/research/api/sessions/{session_id}/messages", headers=gw.headers()).json()
    assert [m["content"] for m in messages["data"] if m["role"] == "user"][-1].endswith("remembered")

    failed = api_client(gw.url, key, user("/fail on purpose"))
    assert failed["events"][-1]["kind"] == "terminal" and failed["events"][-1]["outcome"] == "upstream_error", failed
    refused = api_client(gw.url, "not-the-key-of-this-gateway", user("hi"))
    assert refused["error"]["class"] == "HermesAuthenticationError" and refused["error"]["status"] == 401


async def until(call: Call, status: str, within: float = 30.0, **args: Any) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while (now := await call("run_status", **args))["status"] != status:
        assert time.monotonic() < deadline, now
        await asyncio.sleep(0.1)
    result: dict[str, Any] = now
    return result


@needs_control_mcp
def test_hermes_control_mcp_runs_every_durable_tool_against_the_gateway(gw: GatewayProcess, tmp_path: Path) -> None:
    key = api_key(gw.root)
    doctor = control_doctor(gw.url, key, tmp_path)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert json.loads(doctor.stdout)["ok"] is True

    async def body(call: Call) -> None:
        health = await call("bridge_health")
        assert health["ok"] and health["status"] == "healthy", health
        assert health["capabilities"]["platform"] == "hermes-agent" and health["models"]["data"]
        assert (await call("bridge_health", profile="research"))["models"]["data"][0]["id"] == "research"

        started = await call("run_start", lane="desk", prompt="hello bridge")
        assert started["ok"] and started["run_id"] and started["session_id"], started
        done = await call("run_wait", lane="desk", timeout_seconds=30)
        assert done["status"] == "completed" and done["answer"] == "default (echo): hello bridge", done
        assert (await call("run_status", run_id=started["run_id"]))["status"] == "completed"
        events = await call("run_events", lane="desk")
        assert events["event_count"] > 0 and events["events"][-1]["event"] == "run.completed", events
        assert events["answer"] == done["answer"]
        history = await call("session_history", session_id=started["session_id"])
        assert [m["role"] for m in history["messages"]][-2:] == ["user", "assistant"], history
        again = await call("run_start", lane="desk", prompt="hello bridge", request_id=started["request_id"])
        assert again["replayed"] and again["run_id"] == started["run_id"], again

        research = await call("run_start", lane="lab", prompt="to research", profile="research")
        assert (await call("run_wait", lane="lab", timeout_seconds=30))["answer"] == "research (echo): to research"
        assert research["profile"] == "research"

        long = await call("run_start", lane="long", prompt="/sleep 1.5\nworking")
        await until(call, "running", run_id=long["run_id"])
        steered = await call("run_steer", lane="long", text="also this")
        assert steered["ok"] and steered["run_id"] == long["run_id"], steered
        assert (await call("run_wait", lane="long", timeout_seconds=30))["answer"] == "default (echo): also this"

        stopping = await call("run_start", lane="stop", prompt="/sleep 5\nstop me")
        await until(call, "running", run_id=stopping["run_id"])
        assert (await call("run_stop", lane="stop"))["ok"]
        assert (await call("run_wait", lane="stop", timeout_seconds=30))["status"] == "cancelled"

        live = await call("live_health")  # the TUI runtime's tier: not an API server's, Hermes's or ours
        assert live["ok"] is False, live

    control_mcp(gw.url, key, tmp_path, body, profiles=("research",))
