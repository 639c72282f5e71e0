"""MCP Inspector's CLI (software nobody here wrote) against `backchannel mcp` on stdio and the gateway's `/mcp`:
tools/list and tools/call as a person checking a server would run them (`make interop`).

The Inspector starts a stdio server with a clean environment (no BACKCHANNEL_HOME): the command names the home
with `--home`. Over HTTP it sends the key as a header; `--stored-auth-only` keeps it from starting an OAuth
login of its own, which it does on any 401 (a wrong key then reads as the gateway's "Invalid API key").
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from inspector import MISSING, VERSION, Inspected, inspector

from conftest import GatewayProcess, api_key, free_port, run_cli
from test_messaging import set_messaging

# `make interop` sets BACKCHANNEL_REQUIRE_INSPECTOR: there a missing Inspector is a failure, not a skip
SKIP = MISSING is not None and not os.environ.get("BACKCHANNEL_REQUIRE_INSPECTOR")
pytestmark = [pytest.mark.interop, pytest.mark.skipif(SKIP, reason=str(MISSING))]

TOOLS = {"send_to_session", "send_to_peer", "check_message", "notify_when_idle", "cancel_message", "list_sessions"}
UNKNOWN_RUN = "run_0123456789abcdef0123456789abcdef"


@pytest.fixture
def research(initialised: Path) -> Path:
    """A home whose research profile may message builds (both on the echo engine)."""
    for name in ("research", "builds"):
        assert run_cli("profile", "create", name).exit_code == 0, name
    set_messaging(initialised, "research", allow=["builds"])
    return initialised


def over_stdio(home: Path, scratch: Path, *args: str) -> Inspected:
    server = [sys.executable, "-m", "backchannel", "mcp", "--home", str(home), "--as", "research"]
    return inspector(scratch, *args, "--", *server)


Run = Callable[..., Inspected]  # (scratch, *args): one run of the Inspector against one server


@pytest.fixture
def served(research: Path) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(research, free_port()).start()
    try:
        yield gw
    finally:
        gw.kill()


def over_http(gateway: GatewayProcess, scratch: Path, *args: str, key: str | None = None) -> Inspected:
    url = f"{gateway.url}/p/research/mcp"
    auth = f"Authorization: Bearer {key or api_key(gateway.root)}"
    return inspector(scratch, url, "--transport", "http", "--stored-auth-only", "--header", auth, *args)


def check_listed(done: Inspected) -> None:
    assert done.code == 0, done
    tools = {tool["name"]: tool for tool in done.json["tools"]}
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        properties = tool["inputSchema"]["properties"]
        assert all(prop.get("description") for prop in properties.values()), (name, properties)
    assert tools["send_to_session"]["inputSchema"]["required"] == ["session_id", "message"]


def call(run: Run, scratch: Path, tool: str, *args: str) -> Inspected:
    done: Inspected = run(scratch, "--method", "tools/call", "--tool-name", tool, "--tool-arg", *args)
    return done


def test_the_inspector_version_is_the_pinned_one() -> None:
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text(encoding="utf-8")
    assert f"INSPECTOR_VERSION := {VERSION}\n" in makefile


def test_tools_list_and_call_over_stdio(research: Path, tmp_path: Path) -> None:
    def run(scratch: Path, *args: str) -> Inspected:
        return over_stdio(research, scratch, *args)

    check_listed(run(tmp_path / "list", "--method", "tools/list"))
    sent = call(run, tmp_path / "send", "send_to_session", "session_id=builds", "message=status?", "wait_seconds=20")
    assert sent.code == 0, sent
    reply = sent.tool_result()
    assert (reply["result"], reply["reply"]) == ("delivered", "builds (echo): status?"), reply
    # A refusal is a result the host's model reads (isError, which the Inspector reports with an exit code of its own)
    refused = call(run, tmp_path / "refused", "send_to_session", "session_id=default", "message=let me in")
    assert refused.code != 0 and refused.json["isError"] is True, refused
    assert (refused.tool_result()["result"], refused.tool_result()["error"]["code"]) == ("refused", "not_allowed")
    unknown = call(run, tmp_path / "check", "check_message", f"run_id={UNKNOWN_RUN}")
    assert unknown.tool_result()["result"] == "refused" and UNKNOWN_RUN in unknown.tool_result()["error"]["message"]
    # every call went through the delivery service: the ledger has them, sent by a session of research
    ledger = json.loads(run_cli("ledger", "--json").stdout)
    seen = {(row["sender"].split("/")[0], row["target"].split("/")[0], row["state"]) for row in ledger}
    assert seen == {("research", "builds", "completed"), ("research", "default", "refused:not_allowed")}, seen


def test_tools_list_and_call_over_http_at_the_gateway(served: GatewayProcess, tmp_path: Path) -> None:
    def run(scratch: Path, *args: str) -> Inspected:
        return over_http(served, scratch, *args)

    check_listed(run(tmp_path / "list", "--method", "tools/list"))
    sent = call(run, tmp_path / "send", "send_to_session", "session_id=builds", "message=over http", "wait_seconds=20")
    assert sent.code == 0, sent
    reply = sent.tool_result()
    assert (reply["result"], reply["reply"]) == ("delivered", "builds (echo): over http"), reply
    listed = call(run, tmp_path / "sessions", "list_sessions", "profile=builds")
    assert listed.code == 0 and listed.tool_result()["result"] == "delivered", listed
    assert [s["address"] for s in listed.tool_result()["sessions"]] == ["builds"]
    assert f"run {reply['run_id']} completed" in served.log(), "the gateway ran the turn"


def test_a_wrong_key_reads_as_a_wrong_key(served: GatewayProcess, tmp_path: Path) -> None:
    done = over_http(served, tmp_path / "wrong", "--method", "tools/list", key="not-the-key")
    assert done.code != 0, done
    assert "Invalid API key" in done.stdout + done.stderr, done
    assert "Interactive OAuth" not in done.stdout + done.stderr
