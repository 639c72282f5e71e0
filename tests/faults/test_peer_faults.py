"""Faults between gateways: a peer that accepts and never answers, a request cut after it was sent
(the answer dropped by a proxy, or the peer SIGKILLed mid-request), and `peer run / status --follow /
stop` across a peer restart. Each asks the peer's store afterwards: one run, one reply, whatever came back.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bad_servers import CuttingProxy, SilentPeer
from conftest import CliResult, GatewayProcess, api_key, run_cli
from gateway_http import new_home, set_messaging
from store_audit import audit_run, runs_with_text

pytestmark = pytest.mark.faults

TIMEOUT = 1.0  # the peers' timeout_seconds here: a hung peer is given up on after this


@pytest.fixture
def beta(tmp_path: Path, initialised: Path) -> Iterator[GatewayProcess]:
    """A real Backchannel gateway of another home, for our home (`initialised`) to reach."""
    gw = new_home(tmp_path / "beta").start()
    try:
        yield gw
    finally:
        gw.kill()


def add_peer(name: str, url: str, key: str) -> None:
    added = run_cli("peer", "add", name, "--url", url, "--key", key, "--timeout", str(TIMEOUT))
    assert added.exit_code == 0, added.stderr


def dm(target: str, text: str, key: str, *extra: str) -> tuple[CliResult, dict[str, Any]]:
    result = run_cli("peer", "dm", target, text, "--idempotency-key", key, "--json", *extra)
    assert "Traceback" not in result.stderr, result.stderr
    return result, json.loads(result.stdout)


def one_run(root: Path, text: str) -> dict[str, Any]:
    found = runs_with_text(root, text)
    assert len(found) == 1, f"{len(found)} runs of {text!r} on the peer: {found}"
    return found[0]


def test_a_peer_that_accepts_and_never_answers_is_unknown_at_its_timeout(
    initialised: Path, beta: GatewayProcess
) -> None:
    with SilentPeer() as silent:
        add_peer("hung", silent.url, "hung-key-0123")
        started = time.monotonic()
        result, body = dm("hung", "hello, hung peer", "hung-ticket-1")
        took = time.monotonic() - started
        assert result.exit_code == 1, (result.stdout, result.stderr)
        assert body["result"] == "unknown" and body["idempotency_key"] == "hung-ticket-1", body
        assert "--idempotency-key hung-ticket-1" in result.stderr
        assert "unreachable" not in result.stdout + result.stderr
        assert took < TIMEOUT + 3, f"gave up after {took:.1f}s, its timeout is {TIMEOUT}s"

        # An agent's send_to_peer gives up at the same timeout, with the same outcome and its key.
        set_messaging(initialised, "default", allow=["peer:hung"])
        started = time.monotonic()
        sent = run_cli("send", "default", "/peer hung hello from an agent", "--json")
        took = time.monotonic() - started
        assert sent.exit_code == 0, sent.stderr  # the turn goes on: the model learns the outcome
        reply = json.loads(sent.stdout)["reply"]
        tool = json.loads(reply.split("→ send_to_peer: ", 1)[1].splitlines()[0])
        assert tool["result"] == "unknown" and tool["idempotency_key"], tool
        assert "unreachable" not in json.dumps(tool)
        assert took < TIMEOUT * 2 + 4, f"the agent's send gave up after {took:.1f}s"

    # The same key asked of a real peer (the address fixed) finds one run, however often it is asked.
    add_peer("hung", beta.url, api_key(beta.root))
    first, body = dm("hung", "hello, hung peer", "hung-ticket-1")
    assert first.exit_code == 0 and body["result"] == "delivered", (first.stdout, first.stderr)
    _again, replay = dm("hung", "hello, hung peer", "hung-ticket-1")
    assert replay["result"] == "delivered" and replay["replayed"] is True, replay
    assert replay["run_id"] == body["run_id"]
    audit_run(beta.root, one_run(beta.root, "hello, hung peer"))


def test_an_answer_dropped_after_the_peer_ran_the_turn_is_asked_again_never_run_twice(
    initialised: Path, beta: GatewayProcess
) -> None:
    with CuttingProxy(beta.url, cut=1) as proxy:
        add_peer("cut", proxy.url, api_key(beta.root))
        result, body = dm("cut", "cut me off", "cut-ticket-1")
        assert result.exit_code == 0, (result.stdout, result.stderr)
        # The Backchannel peer deduplicates on the key: our side asked again and got the first run's answer.
        assert body["result"] == "delivered" and body["replayed"] is True, body
        assert proxy.chats == 2
        _again, replay = dm("cut", "cut me off", "cut-ticket-1")
        assert replay["result"] == "delivered" and replay["run_id"] == body["run_id"], replay
    audit_run(beta.root, one_run(beta.root, "cut me off"))


def test_a_peer_killed_mid_request_runs_the_turn_once_when_asked_again(initialised: Path, beta: GatewayProcess) -> None:
    add_peer("beta", beta.url, api_key(beta.root))
    text = "/sleep 1.5\nkilled mid-request"
    outcome: dict[str, Any] = {}

    def send() -> None:
        outcome["result"], outcome["body"] = dm("beta", text, "kill-ticket-1", "--wait", "20")

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    deadline = time.monotonic() + 10
    while not [r for r in runs_with_text(beta.root, "killed mid-request") if r["state"] == "running"]:
        assert time.monotonic() < deadline, "the peer never started the turn"
        time.sleep(0.05)
    beta.kill()  # SIGKILL while the request waits for its answer
    beta.start()
    sender.join(20)
    first = outcome["body"]
    assert first["result"] in ("unknown", "receipt", "delivered"), first
    assert first["idempotency_key"] == "kill-ticket-1"
    again, body = dm("beta", text, "kill-ticket-1", "--wait", "20")
    assert again.exit_code == 0 and body["result"] == "delivered", (again.stdout, again.stderr)
    run = one_run(beta.root, "killed mid-request")
    audit_run(beta.root, run)
    assert run["attempts"] == 2, run  # the attempt the kill cut, then the one that finished


def test_peer_run_follow_status_and_stop_across_a_peer_restart(initialised: Path, beta: GatewayProcess) -> None:
    add_peer("beta", beta.url, api_key(beta.root))
    started = run_cli("peer", "run", "beta", "/sleep 2\nacross a restart", "--idempotency-key", "restart-1", "--json")
    assert started.exit_code == 0, started.stderr
    run_id = json.loads(started.stdout)["run_id"]

    followed: dict[str, CliResult] = {}

    def follow() -> None:
        followed["result"] = run_cli("peer", "status", "beta", run_id, "--follow", "--json")

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    time.sleep(0.5)
    beta.terminate()  # the turn is cut by the stop (grace shorter than the turn) and requeued
    beta.start()
    follower.join(30)
    assert not follower.is_alive(), "follow never ended"
    result = followed["result"]
    assert "Traceback" not in result.stderr, result.stderr
    data = json.loads(result.stdout)
    # The follow reconnected and saw the run to its end (or said clearly that it could not).
    assert data.get("status") == "completed" and "across a restart" in data["output"], (data, result.stderr)

    status = run_cli("peer", "status", "beta", run_id, "--json")
    assert status.exit_code == 0, status.stderr
    assert json.loads(status.stdout)["status"] == "completed"
    run = one_run(beta.root, "across a restart")
    audit_run(beta.root, run)

    # A stop after the peer restarted reaches the requeued run.
    started = run_cli("peer", "run", "beta", "/sleep 30\nstop me later", "--idempotency-key", "restart-2", "--json")
    second = json.loads(started.stdout)["run_id"]
    time.sleep(0.3)
    beta.kill()
    beta.start()
    stopped = run_cli("peer", "stop", "beta", second, "--json")
    assert stopped.exit_code in (0, 1) and "Traceback" not in stopped.stderr, stopped.stderr
    status = run_cli("peer", "status", "beta", second, "--json")
    assert json.loads(status.stdout)["status"] == "cancelled", status.stdout
    audit_run(beta.root, one_run(beta.root, "stop me later"), state="cancelled")


def killed_mid_dm(beta: GatewayProcess, text: str, key: str, *extra: str) -> CliResult:
    """`peer dm` of `text` to beta, SIGKILLed while the request waits for its answer; beta stays down."""
    outcome: list[CliResult] = []
    words = ("peer", "dm", "beta", text, "--idempotency-key", key, "--wait", "20", *extra)
    sender = threading.Thread(target=lambda: outcome.append(run_cli(*words)), daemon=True)
    sender.start()
    deadline = time.monotonic() + 10
    while not [r for r in runs_with_text(beta.root, text.splitlines()[-1]) if r["state"] == "running"]:
        assert time.monotonic() < deadline, "the peer never started the turn"
        time.sleep(0.05)
    beta.kill()
    sender.join(30)
    [result] = outcome
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_a_peer_killed_mid_dm_says_one_thing_ask_again_with_the_same_key(
    initialised: Path, beta: GatewayProcess
) -> None:
    add_peer("beta", beta.url, api_key(beta.root))
    text = "/sleep 1.5\nkilled and left down"
    result = killed_mid_dm(beta, text, "kill-ticket-2", "--json")
    body = json.loads(result.stdout)
    assert result.exit_code == 1 and body["result"] == "unknown", (result.stdout, result.stderr)
    said = json.dumps(body["error"]) + result.stderr
    assert "do not resend" not in said, said  # a Backchannel peer deduplicates: asking again is the advice
    assert "peer dm beta '/sleep 1.5\nkilled and left down' --idempotency-key kill-ticket-2" in result.stderr
    # one thing said: the outcome is unknown, it may have arrived, the command (no "could not reach" beside it)
    assert "could not reach" not in said and said.count("may have arrived") == 1, said
    assert "the outcome is unknown: it may have arrived" in result.stderr, result.stderr

    beta.start()
    as_text = killed_mid_dm(beta, "/sleep 1.5\nkilled in text mode", "kill-ticket-3")
    assert as_text.exit_code == 1 and "could not reach" not in as_text.stderr, as_text.stderr
    assert as_text.stderr.count("may have arrived") == 1 and "--idempotency-key kill-ticket-3" in as_text.stderr

    beta.start()
    again, answered = dm("beta", text, "kill-ticket-2", "--wait", "20")
    assert again.exit_code == 0 and answered["result"] == "delivered", (again.stdout, again.stderr)
    audit_run(beta.root, one_run(beta.root, "killed and left down"))
