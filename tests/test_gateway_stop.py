"""`backchannel gateway stop`: the graceful stop on every platform (Windows has no SIGTERM), through the real CLI
against a real gateway process: it stops as on SIGTERM (turns finish within the grace, the rest are requeued
and run once after the restart, the home's lock is released) and the command waits until it is gone."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from backchannel.home import runtime
from conftest import run_cli
from gateway_http import TERMINAL, chat, client, gateway_with, poll
from store_audit import audit_key


def test_stop_with_nothing_running_says_so_and_exits_0(initialised: Path) -> None:
    text = run_cli("gateway", "stop")
    assert text.exit_code == 0, text.stderr
    assert "no gateway is running for the home" in text.stderr and text.stdout == ""
    as_json = run_cli("gateway", "stop", "--json")
    assert as_json.exit_code == 0
    assert json.loads(as_json.stdout)["result"] == "not_running"


def test_stop_before_init_is_a_usage_error(home: Path) -> None:
    result = run_cli("gateway", "stop")
    assert result.exit_code == 2 and "backchannel init" in result.stderr


def test_the_gateways_own_options_are_refused_with_stop(initialised: Path) -> None:
    result = run_cli("gateway", "--port", "8400", "stop")
    assert result.exit_code == 2 and "--port" in result.stderr


def test_stop_lets_a_running_turn_finish_within_the_grace_and_releases_the_home(initialised: Path) -> None:
    with gateway_with(initialised, grace=20, process=True) as gw:
        with client(gw) as c:
            sid = c.post("/api/sessions", json={"title": "t"}).json()["session"]["id"]
            run_id = chat(c, sid, "/sleep 1\nfinished in the grace", "stop-graceful", wait=0.1)["run_id"]
            poll(c, run_id, {"running"}, within=10)
        stopped = run_cli("gateway", "stop", "--json")
        assert stopped.exit_code == 0, stopped.stderr
        body = json.loads(stopped.stdout)
        assert body["result"] == "stopped" and body["running_turns"] == 1 and body["grace_seconds"] == 20
        assert gw.proc is not None and body["pid"] == gw.proc.pid
        assert "1 turn running, given up to 20 s to finish" in stopped.stderr
        assert gw.proc is not None and gw.proc.wait(30) == 0, gw.log()  # a clean exit, as on SIGTERM
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{gw.url}/health", timeout=2)
        run = audit_key(initialised, "stop-graceful").run
        assert run["attempts"] == 1 and run["reply"] == "default (echo): finished in the grace", run
        assert "gateway stopped" in gw.log() and "Traceback" not in gw.log()
        gw.start()  # the home's lock was released: a new gateway takes it
        assert run_cli("gateway", "stop").exit_code == 0


def test_stop_requeues_turns_past_the_grace_and_they_run_once_after_the_restart(initialised: Path) -> None:
    with gateway_with(initialised, grace=0.3, process=True) as gw:
        with client(gw) as c:
            sessions = [c.post("/api/sessions", json={"title": f"t{i}"}).json()["session"]["id"] for i in (1, 2)]
            runs = [
                chat(c, sid, f"/sleep 2\nslow turn {i}", f"stop-{i}", wait=0.1)["run_id"]
                for i, sid in enumerate(sessions)
            ]
            for run_id in runs:
                poll(c, run_id, {"running"}, within=10)
        stopped = run_cli("gateway", "stop")
        assert stopped.exit_code == 0, stopped.stderr
        assert "stopped" in stopped.stdout and "2 turns running" in stopped.stderr
        assert gw.proc is not None and gw.proc.wait(30) == 0, gw.log()
        gw.start(grace=0.3)
        with client(gw) as c:
            for run_id in runs:
                run = poll(c, run_id, TERMINAL, within=15)
                assert run["status"] == "completed", run
                assert run["attempts"] == 2, run  # the cut attempt, then the one that finished
        log = gw.log()
    for i in range(2):
        audit_key(initialised, f"stop-{i}")
    assert "Traceback" not in log


def test_stop_finds_the_gateway_on_the_port_it_was_started_on(initialised: Path) -> None:
    """`--port 0`: not the port config.yaml names; the runtime file says where it listens."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "backchannel", "gateway", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while runtime.listening(initialised) is None:
            assert proc.poll() is None and time.monotonic() < deadline, "the gateway did not come up"
            time.sleep(0.05)
        stopped = run_cli("gateway", "stop", "--json")
        assert stopped.exit_code == 0, stopped.stderr
        assert json.loads(stopped.stdout)["pid"] == proc.pid
        assert proc.wait(30) == 0
        assert runtime.listening(initialised) is None and not runtime.held(initialised)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.windows("CTRL_BREAK_EVENT is a Windows console event")
def test_ctrl_break_stops_the_gateway_as_ctrl_c_does(initialised: Path) -> None:
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-m", "backchannel", "gateway", "--port", "0", "--grace", "5"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        creationflags=subprocess.CREATE_NEW_PROCESS_GROUP,  # type: ignore[attr-defined]
    )
    try:
        deadline = time.monotonic() + 30
        while runtime.listening(initialised) is None:
            assert proc.poll() is None and time.monotonic() < deadline, "the gateway did not come up"
            time.sleep(0.05)
        proc.send_signal(signal.CTRL_BREAK_EVENT)  # type: ignore[attr-defined]
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err  # as Ctrl-C: interrupted, after a graceful stop
        assert b"Traceback" not in err
        assert not runtime.held(initialised)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
