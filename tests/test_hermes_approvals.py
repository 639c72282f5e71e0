"""A Hermes run that waits for its person's approval (a fake Hermes that keeps runs): the person here is asked, in
`backchannel ask` and `/v1/questions`, and the answer (a decline: deny) goes back to the same Hermes run.
The real Hermes gateways: tests/interop/test_hermes_approvals.py."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from conftest import GatewayThread, run_cli
from fake_hermes import FakeHermes

KEY = "hermes-fake-key-0123456789"


def hermes_profile(root: Path, url: str) -> None:
    made = run_cli("profile", "create", "ops", "--engine", "hermes", "--base-url", url, "--api-key-env", "HERMES_KEY")
    assert made.exit_code == 0, made.stderr
    with (root / ".env").open("a") as fh:
        fh.write(f"HERMES_KEY={KEY}\n")


def open_question(gateway: GatewayThread, within: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        listed = httpx.get(f"{gateway.url}/v1/questions", headers=gateway.headers()).json()["data"]
        if listed:
            assert len(listed) == 1, listed
            question: dict[str, Any] = listed[0]
            return question
        assert time.monotonic() < deadline, "no question was asked"
        time.sleep(0.1)


def ended(run_id: str, within: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        run: dict[str, Any] = json.loads(run_cli("runs", "show", run_id, "--json").stdout)
        if run["state"] not in ("queued", "running"):
            return run
        assert time.monotonic() < deadline, run
        time.sleep(0.1)


def test_the_persons_answer_goes_back_to_the_waiting_hermes_run(initialised: Path, gateway: GatewayThread) -> None:
    with FakeHermes(key=KEY, approvals=True) as hermes:
        hermes_profile(initialised, hermes.url)
        run_id = json.loads(run_cli("send", "ops", "clean the cache", "--wait", "0", "--json").stdout)["run_id"]
        question = open_question(gateway)
        assert (question["kind"], question["run_id"], question["for_peer"]) == ("in_turn", run_id, False)
        assert question["choices"] == ["once", "session", "always", "deny"] and question["default"] == "deny"
        assert "rm -rf /srv/cache" in question["question"] and "recursive delete" in question["question"]
        assert json.loads(run_cli("runs", "show", run_id, "--json").stdout)["state"] == "running"  # the same turn
        assert hermes.approvals_given == []

        listed = run_cli("ask", "list")
        assert question["id"] in listed.stdout and "once / session / always / deny" in listed.stdout
        wrong = run_cli("ask", "answer", question["id"], "sure")
        assert wrong.exit_code == 2 and "takes one of: once, session, always, deny" in wrong.stderr, wrong
        assert hermes.approvals_given == []
        assert run_cli("ask", "answer", question["id"], "Session").exit_code == 0

        run = ended(run_id)
        assert (run["state"], run["reply"]) == ("completed", "ran it (session)"), run
        assert hermes.approvals_given == ["session"]  # once, the choice as Hermes spells it
        [closed] = httpx.get(f"{gateway.url}/v1/questions?state=any", headers=gateway.headers()).json()["data"]
        assert (closed["state"], closed["answer"], closed["answered_by"]) == ("answered", "session", "human:cli")
        assert [m for m, p, _ in hermes.requests if p == "/v1/runs"] == ["POST"]  # one Hermes run


def test_a_declined_approval_is_denied_there(initialised: Path, gateway: GatewayThread) -> None:
    with FakeHermes(key=KEY, approvals=True) as hermes:
        hermes_profile(initialised, hermes.url)
        run_id = json.loads(run_cli("send", "ops", "clean the cache", "--wait", "0", "--json").stdout)["run_id"]
        question = open_question(gateway)
        declined = httpx.post(
            f"{gateway.url}/v1/questions/{question['id']}", json={"cancel": True}, headers=gateway.headers()
        )
        assert declined.status_code == 200, declined.text
        assert declined.json()["run"]["status"] == "running"  # still the same turn, told "deny" over there
        run = ended(run_id)
        assert (run["state"], run["reply"]) == ("completed", "refused it (deny)"), run
        assert hermes.approvals_given == ["deny"]


def test_a_stopped_run_closes_its_approval_question(initialised: Path, gateway: GatewayThread) -> None:
    with FakeHermes(key=KEY, approvals=True) as hermes:
        hermes_profile(initialised, hermes.url)
        run_id = json.loads(run_cli("send", "ops", "clean the cache", "--wait", "0", "--json").stdout)["run_id"]
        question = open_question(gateway)
        assert run_cli("runs", "stop", run_id).exit_code == 0
        assert ended(run_id)["state"] == "cancelled"
        shown = httpx.get(f"{gateway.url}/v1/questions/{question['id']}", headers=gateway.headers()).json()
        assert (shown["state"], shown["answered_by"]) == ("cancelled", "stop")
        assert hermes.approvals_given == []
