"""A2A agents as peers: `backchannel peer add/dm/run/status/stop` against an agent built with a2a-sdk (its
hello-world shape, tests/a2a_echo_server.py, in a subprocess), through the real CLI in a temporary home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from backchannel.home import config
from conftest import free_port, run_cli

KEY = "a2a-test-key-0123456789"
SERVER = Path(__file__).parent / "a2a_echo_server.py"
EXTENSION = "urn:backchannel:a2a:hops-chain:v1"


@dataclass
class Agent:
    url: str
    proc: subprocess.Popen[bytes]


def start_agent(*flags: str) -> Agent:
    port = free_port()
    env = {**os.environ, "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false"}
    proc = subprocess.Popen([sys.executable, str(SERVER), str(port), KEY, *flags], env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/.well-known/agent-card.json", timeout=0.5, trust_env=False).status_code == 200:
                return Agent(url, proc)
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the A2A test agent did not come up")


@pytest.fixture(scope="module")
def agent() -> Iterator[Agent]:
    a = start_agent("--extension")
    yield a
    a.proc.kill()
    a.proc.wait(10)


@pytest.fixture(scope="module")
def plain_agent() -> Iterator[Agent]:
    """No streaming, no Backchannel extension: an A2A agent of any make."""
    a = start_agent("--no-streaming")
    yield a
    a.proc.kill()
    a.proc.wait(10)


def add(name: str, url: str, key: str = KEY) -> None:
    added = run_cli("peer", "add", name, "--url", url, "--key", key, "--no-key-back")
    assert added.exit_code == 0, added.stderr


def json_of(*args: str) -> tuple[int, dict[str, object]]:
    result = run_cli(*args, "--json")
    assert "Traceback" not in result.stderr, result.stderr
    return result.exit_code, json.loads(result.stdout)


def test_peer_add_finds_the_card_and_records_the_dialect(initialised: Path, agent: Agent) -> None:
    added = run_cli("peer", "add", "echo", "--url", agent.url, "--key", KEY, "--no-key-back")
    assert added.exit_code == 0, added.stderr
    assert "A2A agent echo 1.0.0" in added.stderr and f"{agent.url}/rpc" in added.stderr, added.stderr
    entry = config.load_yaml(config.config_path(initialised))["peers"]["echo"]
    assert entry == {"url": agent.url, "note": "", "dialect": "a2a", "a2a_url": f"{agent.url}/rpc"}
    # a URL that is the card itself does as well
    add("card", f"{agent.url}/.well-known/agent-card.json")
    code, listed = json_of("peer", "list")
    assert code == 0
    assert {p["name"]: p["dialect"] for p in listed} == {"echo": "a2a", "card": "a2a"}  # type: ignore[index]


def test_an_old_peer_entry_without_a_dialect_is_a_hermes_peer(initialised: Path) -> None:
    path = config.config_path(initialised)
    data = config.load_yaml(path)
    data["peers"] = {"old": {"url": "http://127.0.0.1:9", "note": ""}}
    config.write_yaml(path, data)
    code, listed = json_of("peer", "list")
    assert code == 0 and listed[0]["dialect"] == "hermes" and listed[0]["a2a_url"] is None  # type: ignore[index]


def test_a_url_that_answers_neither_is_an_error_and_saves_nothing(initialised: Path, agent: Agent) -> None:
    before = config.config_path(initialised).read_text()
    for url in (f"{agent.url}/nothing/here", f"{agent.url}/nothing.json"):
        result = run_cli("peer", "add", "nope", "--url", url, "--key", KEY, "--no-key-back")
        assert result.exit_code == 2, (result.stdout, result.stderr)
        assert "nothing was saved" in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert config.config_path(initialised).read_text() == before
    assert "BACKCHANNEL_PEER_NOPE_KEY" not in config.read_env(initialised)


def test_dm_is_a_blocking_send_message_with_our_key_as_message_id(initialised: Path, agent: Agent) -> None:
    add("echo", agent.url)
    result = run_cli("peer", "dm", "echo", "hello there")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "echo: hello there"
    code, body = json_of("peer", "dm", "echo", "hello json", "--idempotency-key", "ticket-1")
    assert code == 0
    assert body["result"] == "delivered" and body["reply"] == "echo: hello json", body
    assert body["peer"] == "echo" and body["idempotency_key"] == "ticket-1" and body["run_id"], body
    # the same key again is answered from our own record: nothing is sent twice
    code, again = json_of("peer", "dm", "echo", "hello json", "--idempotency-key", "ticket-1")
    assert code == 0 and again["replayed"] is True and again["run_id"] == body["run_id"], again


def test_the_extension_carries_hops_chain_and_the_sending_profile_when_the_card_declares_it(
    initialised: Path, agent: Agent, plain_agent: Agent
) -> None:
    add("echo", agent.url)
    add("plain", plain_agent.url)
    result = run_cli("peer", "dm", "echo", "/seen")
    assert result.exit_code == 0, result.stderr
    seen = json.loads(result.stdout.removeprefix("echo: "))
    exchange = seen["metadata"][EXTENSION].pop("exchange")  # the person's message begins an exchange of ours
    gateway_id = config.load_gateway_config(initialised).gateway_id
    assert exchange.startswith(f"{gateway_id}:xch_"), exchange
    carried = {"hops": 0.0, "chain": [], "profile": "default"}
    assert seen == {"metadata": {EXTENSION: carried}, "extensions": [EXTENSION]}, seen
    result = run_cli("peer", "dm", "plain", "/seen")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout.removeprefix("echo: ")) == {"metadata": {}, "extensions": []}


def test_dm_past_its_wait_is_a_receipt_and_status_follows_it(initialised: Path, plain_agent: Agent) -> None:
    add("plain", plain_agent.url)
    code, body = json_of("peer", "dm", "plain", "sleep 1.5 late", "--wait", "0.2")
    assert code == 0 and body["result"] == "receipt", body
    run_id = str(body["run_id"])
    # no streaming on this card: --follow polls GetTask until the task ends
    followed = run_cli("peer", "status", "plain", run_id, "--follow")
    assert followed.exit_code == 0, followed.stderr
    assert followed.stdout.splitlines() == [f"{run_id}: completed", "echo: late"], followed.stdout


def test_dm_and_run_with_a_deadline_to_an_agent_that_knows_no_deadlines(initialised: Path, plain_agent: Agent) -> None:
    """An A2A agent of another make ignores the deadline: answered as before, and a dm whose deadline comes before
    its --wait ends is a receipt at the deadline (the agent was given the time left as its wait)."""
    add("plain", plain_agent.url)
    code, body = json_of("peer", "dm", "plain", "in time", "--deadline", "10m")
    assert code == 0 and body["result"] == "delivered" and body["reply"] == "echo: in time", body
    started = time.monotonic()
    late = run_cli("peer", "dm", "plain", "sleep 8 too late", "--deadline", "1.5s", "--wait", "60")
    assert time.monotonic() - started < 6, "the dm waited past its deadline"
    assert late.exit_code == 0 and late.stdout.startswith("receipt: run "), late.stdout
    assert "its deadline came first" in late.stderr, late.stderr
    code, ran = json_of("peer", "run", "plain", "sleep 0.2 done", "--deadline", "10m")
    assert code == 0 and ran["run_id"] and ran["error"] is None, ran
    followed = run_cli("peer", "status", "plain", str(ran["run_id"]), "--follow")
    assert followed.exit_code == 0 and followed.stdout.splitlines()[-1] == "echo: done", followed.stdout


def test_run_status_stop_and_follow(initialised: Path, agent: Agent) -> None:
    add("echo", agent.url)
    code, started = json_of("peer", "run", "echo", "sleep 0.5 done", "--idempotency-key", "run-1")
    assert code == 0 and started["run_id"] and started["status"] == "queued", started
    run_id = str(started["run_id"])
    followed = run_cli("peer", "status", "echo", run_id, "--follow")  # SubscribeToTask: the card says streaming
    assert followed.exit_code == 0, followed.stderr
    assert "run.completed" in followed.stderr, followed.stderr
    code, status = json_of("peer", "status", "echo", run_id)
    assert code == 0 and status["result"] == "delivered" and status["output"] == "echo: done", status

    code, slow = json_of("peer", "run", "echo", "sleep 30 never")
    stopped = run_cli("peer", "stop", "echo", str(slow["run_id"]))
    assert stopped.exit_code == 0, stopped.stderr
    assert stopped.stdout.startswith(f"{slow['run_id']}: cancelled"), stopped.stdout
    code, status = json_of("peer", "status", "echo", str(slow["run_id"]))
    assert code == 1 and status["result"] == "failed" and status["status"] == "cancelled", status


def test_an_unknown_task_is_an_unknown_run_exit_1(initialised: Path, agent: Agent) -> None:
    add("echo", agent.url)
    code, status = json_of("peer", "status", "echo", "no-such-task")
    assert code == 1 and status["result"] == "unknown" and status["reason"] == "run_not_found", status


def test_a_wrong_key_is_a_peer_auth_error_and_an_agent_address_a_usage_error(initialised: Path, agent: Agent) -> None:
    add("echo", agent.url, key="the-wrong-key-123")
    result = run_cli("peer", "dm", "echo", "let me in")
    assert result.exit_code == 1, (result.stdout, result.stderr)
    # What the agent's error envelope says follows, read as every peer client reads one.
    assert "refused our key (HTTP 401): unauthorized" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert "the-wrong-key-123" not in result.stderr + result.stdout
    code, answer = json_of("peer", "dm", "echo", "let me in")
    assert code == 1 and answer["result"] == "failed" and answer["error"]["code"] == "peer_auth", answer
    result = run_cli("peer", "dm", "echo/research", "which agent?")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "is an A2A agent" in result.stderr and "Traceback" not in result.stderr, result.stderr
