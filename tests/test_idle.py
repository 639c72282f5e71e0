"""A notice when idle (issue 25): an agent's `notify_when_idle` and the person's `runs wait-idle`.

Through the real CLI and a gateway of this home: a session kept busy by a slow echo turn (`/sleep`); the agent's
notice comes into its own session as a wake-up once that turn ended, and only then; a session idle already is said
to be at once; a session the agent may not message it may not watch either; `runs wait-idle` exits 1 while the
session is busy past its timeout and 0 once it is idle.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from conftest import run_cli
from gateway_http import gateway_with, set_messaging

NOTICE = "has nothing queued or running now"


def tool_result(done: Any) -> dict[str, Any]:
    """The notify_when_idle result the echo engine shows in its reply."""
    assert done.exit_code == 0, done.stderr
    reply = json.loads(done.stdout)["reply"]
    return dict(json.loads(reply.split("→ notify_when_idle: ", 1)[1]))


def watch(target: str) -> str:
    return "/tool notify_when_idle " + json.dumps({"session_id": target})


def runs_of(profile: str) -> list[dict[str, Any]]:
    listed = run_cli("runs", "list", "-p", profile, "--json")
    assert listed.exit_code == 0, listed.stderr
    return list(json.loads(listed.stdout))


def test_an_agent_is_told_once_the_session_it_watches_is_idle(initialised: Path) -> None:
    for name in ("lead", "builds"):
        assert run_cli("profile", "create", name).exit_code == 0
    set_messaging(initialised, "lead", allow=["builds"])
    with gateway_with(initialised):
        slow = run_cli("send", "builds", "/sleep 2\nbuilding", "--wait", "0", "--json")
        assert slow.exit_code == 0, slow.stderr
        slow_run = json.loads(slow.stdout)["run_id"]
        asked = tool_result(run_cli("send", "lead", watch("builds"), "--json"))
        assert asked["result"] == "receipt" and asked["state"] == "watching", asked
        assert asked["to"].startswith("builds/")
        assert not [r for r in runs_of("lead") if NOTICE in r["message"]]  # builds is still busy: nothing yet

        deadline = time.monotonic() + 30
        while not (notices := [r for r in runs_of("lead") if NOTICE in r["message"]]):
            assert time.monotonic() < deadline, "no idle notice came"
            time.sleep(0.1)
        built = json.loads(run_cli("runs", "show", slow_run, "--json").stdout)
        assert built["state"] == "completed"
        notice = notices[0]
        assert notice["created_at"] >= built["finished_at"]  # told after the turn ended, not before
        assert notice["sender"] == asked["to"] and notice["message"].endswith("\nidle")
        assert notice["message"].startswith(f"[Notice: {asked['to']} has nothing queued")  # names the session
        assert len(notices) == 1  # one notice (its wake's key keeps it to one, whoever delivers it)


def test_a_session_idle_already_is_said_at_once_and_one_it_may_not_message_is_refused(initialised: Path) -> None:
    for name in ("lead", "builds", "secret"):
        assert run_cli("profile", "create", name).exit_code == 0
    set_messaging(initialised, "lead", allow=["builds"])
    idle = tool_result(run_cli("send", "lead", watch("builds"), "--json"))
    assert idle["result"] == "delivered" and idle["state"] == "idle" and idle["reply"] == "idle", idle
    refused = tool_result(run_cli("send", "lead", watch("secret"), "--json"))
    assert refused["result"] == "refused" and refused["error"]["code"] == "not_allowed", refused
    unknown = tool_result(run_cli("send", "lead", watch("nosuch"), "--json"))
    assert unknown["result"] in ("failed", "refused") and "nosuch" in unknown["error"]["message"], unknown


def test_runs_wait_idle_exits_when_the_session_has_nothing_left(initialised: Path) -> None:
    assert run_cli("profile", "create", "builds").exit_code == 0
    with gateway_with(initialised):
        slow = run_cli("send", "builds", "/sleep 2\nbuilding", "--wait", "0", "--json")
        assert slow.exit_code == 0, slow.stderr
        busy = run_cli("runs", "wait-idle", "builds", "--timeout", "0.2")
        assert busy.exit_code == 1, busy.stdout
        assert "still busy after 0.2 s: 1 running, 0 queued" in busy.stdout
        waited = run_cli("runs", "wait-idle", "builds", "--timeout", "30", "--json")
        assert waited.exit_code == 0, waited.stderr
        shown = json.loads(waited.stdout)
        assert shown["idle"] is True and shown["running"] == [] and shown["queued"] == []
        ran = json.loads(run_cli("runs", "show", json.loads(slow.stdout)["run_id"], "--json").stdout)
        assert ran["state"] == "completed"  # idle means the turn it waited for has ended
    unknown = run_cli("runs", "wait-idle", "nosuch")
    assert unknown.exit_code == 2 and "nosuch" in unknown.stderr
