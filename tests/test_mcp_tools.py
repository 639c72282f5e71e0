"""MCP servers' tools for Backchannel's agents: a profile's `mcp_servers:` offered beside its own tools.

A real server from PyPI (mcp-server-time) is called by an agent on the scripted model; the tests' own
stdio server (tests/mcp_test_server.py) gives the errors, a timeout, a server that dies, one that cannot
start and two tools that would have one name.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import GatewayThread, api_key, free_port, run_cli
from scripted_model import ScriptedModel
from test_openai_e2e import make_openai_profile

TEST_SERVER = str(Path(__file__).with_name("mcp_test_server.py"))


def add_servers(root: Path, servers: dict[str, Any]) -> None:
    path = root / "profiles/coder/config.yaml"
    data = yaml.safe_load(path.read_text())
    data["mcp_servers"] = servers
    path.write_text(yaml.safe_dump(data))


def server_entry(*args: str, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [TEST_SERVER, *args], **extra}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def tool_results(model: ScriptedModel) -> list[dict[str, Any]]:
    """Each tool result the model was sent, in order (the last message of each request that follows one)."""
    return [json.loads(r["messages"][-1]["content"]) for r in model.requests if r["messages"][-1]["role"] == "tool"]


def chat(message: str) -> Any:
    return run_cli("chat", "-p", "coder", "-q", message, "--json")


def test_an_agent_calls_a_tool_of_a_real_mcp_server(initialised: Path) -> None:
    script = [call("time__get_current_time", timezone="Europe/Paris"), "It is late in Paris."]
    with ScriptedModel(script) as model:
        make_openai_profile(initialised, model.base_url)
        add_servers(
            initialised,
            {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}},
        )
        result = chat("what time is it in Paris?")
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["reply"] == "It is late in Paris."
        offered = {t["function"]["name"]: t["function"] for t in model.requests[0]["tools"]}
        assert {"memory", "send_to_session", "time__get_current_time", "time__convert_time"} <= set(offered)
        assert "timezone" in offered["time__get_current_time"]["parameters"]["properties"]
        (answer,) = tool_results(model)
        assert "error" not in answer and answer["result"] == "delivered", answer
        assert "Europe/Paris" in answer["content"] and "datetime" in answer["content"]


def test_errors_and_timeouts_are_tool_results_and_env_comes_from_dot_env(initialised: Path) -> None:
    script = [
        call("t__fail"),
        call("t__slow", seconds=10),
        call("t__nope"),
        call("t__echo", text="hi"),
        "done",
    ]
    with ScriptedModel(script) as model:
        make_openai_profile(initialised, model.base_url)
        with (initialised / ".env").open("a") as fh:
            fh.write("MY_GREETING=hello\n")
        add_servers(initialised, {"t": server_entry(env={"GREETING": "${MY_GREETING}"}, timeout=1)})
        result = chat("try the tools")
        assert result.exit_code == 0, result.stderr
        failed, slow, unknown, echo = tool_results(model)
    assert failed["error"]["code"] == "tool_error" and "always fails" in failed["error"]["message"]
    assert slow["error"]["code"] == "tool_timeout" and "'t'" in slow["error"]["message"]
    assert unknown["error"]["code"] == "unknown_tool"
    assert echo["content"] == "hello: hi"
    # each result says what became of the call: the tool ran and failed; it may have acted; no such tool; done
    assert [r["result"] for r in (failed, slow, unknown, echo)] == ["failed", "unknown", "refused", "delivered"]


def _pid(result: dict[str, Any]) -> int:
    return int(result["content"])


@pytest.mark.skipif(sys.platform == "win32", reason="checks the server's process by its pid")
def test_a_server_is_kept_running_started_again_when_it_dies_and_stopped_with_the_gateway(initialised: Path) -> None:
    script = [call("t__pid"), call("t__die"), call("t__pid"), "first", call("t__pid"), "second"]
    with ScriptedModel(script) as model:
        make_openai_profile(initialised, model.base_url)
        add_servers(initialised, {"t": server_entry()})
        gateway = GatewayThread(initialised, free_port()).start()
        try:
            assert run_cli("chat", "-p", "coder", "-q", "one").exit_code == 0
            assert run_cli("chat", "-p", "coder", "-q", "two").exit_code == 0
            before, died, after, next_turn = tool_results(model)
            assert died["error"]["code"] == "tool_failed"
            assert _pid(before) != _pid(after), "the server that died was started again"
            assert _pid(after) == _pid(next_turn), "the server is kept running between turns"
            assert gateway.stop() == 0
        finally:
            gateway.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(_pid(after), 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError("the MCP server still runs after its gateway stopped")


def test_a_server_that_cannot_start_is_named_in_the_turns_error_and_in_doctor(initialised: Path) -> None:
    with ScriptedModel(["never asked"]) as model:
        make_openai_profile(initialised, model.base_url)
        add_servers(initialised, {"good": server_entry(), "broken": server_entry("--fail-start")})
        result = chat("hello")
        assert result.exit_code == 1
        error = json.loads(result.stdout or result.stderr)
        text = json.dumps(error)
        assert "mcp_server_failed" in text and "'broken'" in text and "'coder'" in text, text
        assert "Traceback" not in result.stderr
        assert model.requests == [], "the turn fails before the model is asked"
        doctor = run_cli("doctor", "--json")
    assert doctor.exit_code == 1
    checks = {c["check"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["mcp coder/broken"]["status"] == "fail" and "could not start" in checks["mcp coder/broken"]["detail"]
    assert checks["mcp coder/good"]["status"] == "ok" and "echo" in checks["mcp coder/good"]["detail"]


def test_two_tools_with_one_name_are_refused_at_load(initialised: Path) -> None:
    with ScriptedModel(["never asked"]) as model:
        make_openai_profile(initialised, model.base_url)
        add_servers(initialised, {"files": server_entry("--odd-names")})
        result = chat("hello")
        assert result.exit_code != 0
        text = result.stdout + result.stderr
        assert "mcp_tool_collision" in text and "'read.file'" in text and "'read_file'" in text, text
        assert "files__read_file" in text
        assert model.requests == []
        doctor = json.loads(run_cli("doctor", "--json").stdout)
    assert any(c["check"] == "mcp coder" and c["status"] == "fail" for c in doctor["checks"])


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"args": ["x"]}, "needs either 'command'"),
        ({"command": "x", "url": "http://127.0.0.1:1/mcp"}, "needs either 'command'"),
        ({"url": "ftp://example"}, "must be an http"),
        ({"command": "x", "env": ["A=1"]}, "env must be a mapping"),
        ({"command": "x", "timeout": 0}, "positive number"),
    ],
)
def test_a_bad_mcp_servers_entry_is_refused_naming_the_key(initialised: Path, entry: dict[str, Any], says: str) -> None:
    make_openai_profile(initialised, f"http://127.0.0.1:{free_port()}/v1")
    add_servers(initialised, {"x": entry})
    result = run_cli("chat", "-p", "coder", "-q", "hello")
    assert result.exit_code == 2
    assert "mcp_servers.x" in result.stderr and says in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_streamable_http_server_with_a_header_from_dot_env(initialised: Path) -> None:
    """An agent's `url:` server: here the gateway's own /mcp, its key in a header filled in from .env."""
    script = [call("bc__list_sessions"), "listed"]
    with ScriptedModel(script) as model:
        make_openai_profile(initialised, model.base_url)
        assert run_cli("profile", "create", "builds").exit_code == 0
        gateway = GatewayThread(initialised, free_port())
        with (initialised / ".env").open("a") as fh:
            fh.write(f"BC_KEY={api_key(initialised)}\n")
        add_servers(
            initialised,
            {"bc": {"url": f"{gateway.url}/p/builds/mcp", "headers": {"Authorization": "Bearer ${BC_KEY}"}}},
        )
        gateway.start()
        try:
            result = chat("who can builds message?")
            assert result.exit_code == 0, result.stderr
        finally:
            gateway.close()
        (listed,) = tool_results(model)
    assert "error" not in listed, listed
    # builds may message nothing (deny by default)
    assert json.loads(listed["content"]) == {"result": "delivered", "sessions": []}
