"""A Hermes turn that stops for its person's approval of a dangerous command (each Hermes version, its real
gateway, the scripted model calling Hermes's terminal tool): Backchannel's person is asked the same question, in
`backchannel ask`, and the answer goes back to the same Hermes run, which goes on to its reply.

Hermes 0.22 runs a turn as a run of its own (`/v1/runs`), whose `approval.request` waits for the answer; 0.19's
session chat (the way Backchannel reaches a 0.19 session) has no approval: the command is refused there without
asking, and no question is made.
"""

from __future__ import annotations

import json
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hermes_gateway import HERMES_19, HermesGateway, HermesPython, each_hermes

from backchannel.home import config
from conftest import GatewayProcess, run_cli
from scripted_model import ScriptedModel

pytestmark = pytest.mark.interop
pytest_generate_tests = each_hermes  # hermes_python: each test on each Hermes version
KEY = "interop-approval-key-0123456789"
ASK = "please loosen the file"


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class Loosener:
    """The scripted model: asked to loosen the file, it calls the terminal tool with `chmod 777` (a command Hermes
    flags as dangerous); after the tool's result it says what the tool said."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self.turns = 0

    def __call__(self, body: dict[str, Any]) -> Any:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return f"after the command: {text_of(last['content'])[:300]}"
        if ASK in text_of(last["content"]):
            self.turns += 1
            return {"tool_calls": [{"name": "terminal", "arguments": {"command": f"chmod 777 {self.target}"}}]}
        return "nothing to do"


@contextmanager
def hermes_profile(
    home: Path, tmp_path: Path, hermes_python: HermesPython, *, approval_seconds: float = 120.0
) -> Iterator[tuple[Loosener, Path]]:
    target = tmp_path / "loosen-me.txt"
    target.write_text("x")
    target.chmod(0o600)
    model_fn = Loosener(target)
    with (
        ScriptedModel(model_fn) as model,
        HermesGateway(
            model.base_url,
            api_key=KEY,
            python=hermes_python,
            # manual: the person decides (0.22's default, smart, would ask the scripted model first)
            config={"approvals": {"mode": "manual"}},
        ) as hermes,
    ):
        with (home / ".env").open("a") as fh:
            fh.write(f"HERMES_KEY={KEY}\n")
        made = run_cli(
            "profile", "create", "ops", "--engine", "hermes", "--base-url", hermes.url, "--api-key-env", "HERMES_KEY"
        )
        assert made.exit_code == 0, made.stderr
        path = home / "profiles" / "ops" / "config.yaml"
        data = config.load_yaml(path)
        data["model"] = {**data["model"], "approval_seconds": approval_seconds}
        config.write_yaml(path, data)
        yield model_fn, target


def sent(message: str) -> str:
    out = run_cli("send", "ops", message, "--wait", "0", "--json")
    assert out.exit_code == 0, out.stderr
    run_id: str = json.loads(out.stdout)["run_id"]
    return run_id


def questions(state: str = "open") -> list[dict[str, Any]]:
    listed = run_cli("ask", "list", "--state", state, "--json")
    assert listed.exit_code == 0, listed.stderr
    rows: list[dict[str, Any]] = json.loads(listed.stdout)
    return rows


def wait_question(within: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while not (open_ := questions()):
        assert time.monotonic() < deadline, "no question was asked"
        time.sleep(0.3)
    assert len(open_) == 1, open_
    return open_[0]


def run_of(run_id: str) -> dict[str, Any]:
    shown = run_cli("runs", "show", run_id, "--json")
    assert shown.exit_code == 0, shown.stderr
    body: dict[str, Any] = json.loads(shown.stdout)
    return body


def wait_ended(run_id: str, within: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while (run := run_of(run_id))["state"] in ("queued", "running"):
        assert time.monotonic() < deadline, run
        time.sleep(0.3)
    return run


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_hermes_approval_is_the_persons_question_and_the_answer_goes_back(
    initialised: Path, gateway_process: GatewayProcess, tmp_path: Path, hermes_python: HermesPython
) -> None:
    with hermes_profile(initialised, tmp_path, hermes_python) as (model, target):
        run_id = sent(ASK)
        if hermes_python is HERMES_19:  # no approval on its session chat: refused there, nobody asked
            run = wait_ended(run_id)
            assert run["state"] == "completed", run
            assert questions("any") == [] and mode(target) == 0o600
            return
        question = wait_question()
        assert question["kind"] == "in_turn" and question["run_id"] == run_id
        assert question["choices"] == ["once", "session", "always", "deny"] and question["default"] == "deny"
        assert f"chmod 777 {target}" in question["question"]
        assert run_of(run_id)["state"] == "running"  # the same turn waits over there
        assert mode(target) == 0o600

        wrong = run_cli("ask", "answer", question["id"], "yes please")
        assert wrong.exit_code != 0 and "once" in wrong.stderr and "Traceback" not in wrong.stderr
        answered = run_cli("ask", "answer", question["id"], "once", "--json")
        assert answered.exit_code == 0, answered.stderr

        run = wait_ended(run_id)
        assert run["state"] == "completed", run
        assert run["reply"].startswith("after the command:"), run
        assert mode(target) == 0o777  # Hermes ran it, after the answer
        assert model.turns == 1  # one Hermes turn
        again = run_cli("ask", "answer", question["id"], "deny")
        assert again.exit_code != 0 and "answered once" in again.stderr
        closed = questions("any")
        assert [(q["state"], q["answer"]) for q in closed] == [("answered", "once")]


def test_an_unanswered_hermes_approval_expires_to_deny(
    initialised: Path, gateway_process: GatewayProcess, tmp_path: Path, hermes_python: HermesPython
) -> None:
    if hermes_python is HERMES_19:
        pytest.skip("Hermes 0.19's session chat asks no approval (the first test shows it)")
    with hermes_profile(initialised, tmp_path, hermes_python, approval_seconds=3) as (_, target):
        run_id = sent(ASK)
        question = wait_question()
        run = wait_ended(run_id)
        assert run["state"] == "completed", run
        assert "BLOCKED" in run["reply"], run  # Hermes told its model the command was refused
        assert mode(target) == 0o600
        [closed] = questions("any")
        assert closed["id"] == question["id"]
        assert (closed["state"], closed["answer"], closed["answered_by"]) == ("defaulted", "deny", "expiry")


def test_a_restart_while_the_approval_waits_asks_once_and_runs_once(
    initialised: Path, gateway_process: GatewayProcess, tmp_path: Path, hermes_python: HermesPython
) -> None:
    if hermes_python is HERMES_19:
        pytest.skip("Hermes 0.19's session chat asks no approval (the first test shows it)")
    with hermes_profile(initialised, tmp_path, hermes_python) as (model, target):
        run_id = sent(ASK)
        question = wait_question()
        gateway_process.kill()  # dies while Hermes's run waits for the answer
        gateway_process.start()
        time.sleep(3)  # the run's next attempt finds the same Hermes run, still waiting
        assert [q["id"] for q in questions()] == [question["id"]]

        answered = run_cli("ask", "answer", question["id"], "once")
        assert answered.exit_code == 0, answered.stderr
        run = wait_ended(run_id)
        assert run["state"] == "completed" and run["reply"].startswith("after the command:"), run
        assert mode(target) == 0o777
        assert model.turns == 1  # Hermes's one run: never asked again
        assert len(questions("any")) == 1
