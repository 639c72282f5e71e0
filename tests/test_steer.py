"""Steer or queue (issue 25): a message to a session running a turn waits its turn, or with mode steer joins that
turn at its next model step; the outcome says where it landed (started, steered, queued).

Through the real CLI and gateways of this home: the echo engine's `/sleep` keeps a turn running; a steered message
is answered by that turn (its reply the turn's); an agent steers with send_to_session's `mode`; a bad
`X-Backchannel-Mode` is refused; a gateway killed while a steered message is in its turn loses nothing (the message
is given to the turn's next attempt after the restart).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from conftest import GatewayProcess, run_cli
from gateway_http import gateway_with, set_messaging
from polling import eventually


def sent(*args: str) -> dict[str, Any]:
    done = run_cli("send", *args, "--json")
    assert done.exit_code == 0, done.stderr
    return dict(json.loads(done.stdout))


def shown(run_id: str) -> dict[str, Any]:
    return dict(json.loads(run_cli("runs", "show", run_id, "--json").stdout))


def until(run_id: str, state: str, within: float = 30.0) -> dict[str, Any]:
    return eventually(
        lambda: shown(run_id),
        lambda run: run["state"] == state,
        within=within,
        what=lambda run: f"run {run_id} still {run['state']}",
    )


def test_a_steered_message_joins_the_running_turn_and_a_queued_one_waits(initialised: Path) -> None:
    assert run_cli("profile", "create", "builds").exit_code == 0
    with gateway_with(initialised):
        idle = sent("builds", "/sleep 1.5\nfirst", "--wait", "0")
        assert idle["landed"] == "started"
        until(idle["run_id"], "running")
        queued = sent("builds", "after it", "--wait", "0")
        assert queued["landed"] == "queued" and queued["queue_position"] == 1, queued
        steered = sent("builds", "also this", "--steer")
        assert steered["landed"] == "steered" and steered["result"] == "delivered", steered
        assert steered["reply"] == "builds (echo): also this"  # the running turn read it and answered it
        first = until(idle["run_id"], "completed")
        assert first["reply"] == steered["reply"]  # one turn, one reply
        later = until(queued["run_id"], "completed")
        assert later["reply"] == "builds (echo): after it"
        assert first["finished_at"] <= later["finished_at"]  # the queued one ran after the turn, the steered within
        again = sent("builds", "nothing runs now", "--steer")
        assert again["landed"] == "started"  # a session with no turn running starts one for it


def test_an_agent_steers_with_send_to_session_mode(initialised: Path) -> None:
    for name in ("lead", "builds"):
        assert run_cli("profile", "create", name).exit_code == 0
    set_messaging(initialised, "lead", allow=["builds"])
    with gateway_with(initialised):
        start = {"session_id": "builds", "message": "/sleep 1.5\nbuilding", "wait_seconds": 0}
        started = sent("lead", "/tool send_to_session " + json.dumps(start))
        busy = json.loads(started["reply"].split("→ send_to_session: ", 1)[1])
        until(busy["run_id"], "running")  # a turn of builds that lead's session started
        call = {"session_id": "builds", "message": "use the cache", "mode": "steer", "wait_seconds": 30}
        done = sent("lead", "/tool send_to_session " + json.dumps(call))
        result = json.loads(done["reply"].split("→ send_to_session: ", 1)[1])
        assert result["landed"] == "steered" and result["reply"] == "builds (echo): use the cache", result
        person = sent("builds", "/sleep 1.5\nthe person's turn", "--wait", "0")
        until(person["run_id"], "running")
        other = sent("lead", "/tool send_to_session " + json.dumps({**call, "message": "not into theirs"}))
        queued = json.loads(other["reply"].split("→ send_to_session: ", 1)[1])
        assert queued["landed"] == "queued" and queued["reply"] == "builds (echo): not into theirs", queued
        assert until(person["run_id"], "completed")["reply"] == "builds (echo): the person's turn"
        bad = sent("lead", "/tool send_to_session " + json.dumps({**call, "mode": "shove"}))
        assert '"code": "invalid_arguments"' in bad["reply"] and "mode must be queue or steer" in bad["reply"]


def test_a_mode_that_is_neither_is_refused_over_http(initialised: Path) -> None:
    assert run_cli("profile", "create", "builds").exit_code == 0
    with gateway_with(initialised) as gw:
        session = sent("builds", "hello")["session_id"]
        r = httpx.post(
            f"{gw.url}/p/builds/api/sessions/{session}/chat",
            json={"message": "hi"},
            headers=gw.headers(**{"X-Backchannel-Mode": "shove"}),
        )
        assert r.status_code == 400 and "X-Backchannel-Mode must be queue or steer" in r.json()["error"]["message"]
        assert len(json.loads(run_cli("runs", "list", "-p", "builds", "--json").stdout)) == 1  # nothing recorded


def test_a_steered_message_in_a_killed_turn_is_given_to_its_next_attempt(initialised: Path) -> None:
    assert run_cli("profile", "create", "builds").exit_code == 0
    with gateway_with(initialised, process=True) as gw:
        first = sent("builds", "/sleep 0.5\nfirst", "--wait", "0")
        until(first["run_id"], "running")
        steered = sent("builds", "/sleep 4\nsteered", "--steer", "--wait", "0")
        assert steered["landed"] == "steered"
        until(steered["run_id"], "running")  # taken into the turn, which now sleeps on it
        assert isinstance(gw, GatewayProcess)
        gw.kill()
    assert shown(steered["run_id"])["state"] == "running"  # still the dead turn's: nothing settled it
    with gateway_with(initialised, process=True):
        # The dead turn runs again and takes the message in again: both end with its reply, once.
        again = until(first["run_id"], "completed", within=60)
        done = until(steered["run_id"], "completed")
    assert again["attempts"] == 2 and done["reply"] == again["reply"] == "builds (echo): steered"
