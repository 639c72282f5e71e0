"""The consumed receipt (issue 44): a run records the model call that first held its message in its input
(`consumed {turn, step, at, digest}`), written with the turn's end, and every surface says it.

- the openai engine on the scripted model: the own message read by step 1, a steered one by step 2 of the same
  turn, each digest the one of the text that model call carried;
- the echo engine: the turn itself (step 1);
- a turn that fails before its model answers (the model's endpoint refuses the connection): `consumed: null`,
  `not consumed` in text, and its agent sender's wake says so;
- across a peer, over the Hermes dialect (the envelope's X-Backchannel-Consumed) and over A2A (the task's metadata
  under our extension's key): two real gateways on loopback.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import free_port, run_cli
from gateway_http import gateway_with, set_messaging
from polling import eventually
from scripted_model import ScriptedModel
from test_openai_e2e import make_openai_profile
from test_peers_e2e import Pair, _init_home, cli, peer_key

NOT_CONSUMED = "not consumed"
A2A, HERMES = "beta", "beta-h"  # beta as alpha sees it: by its agent card, by its URL


def sent(*args: str) -> dict[str, Any]:
    done = run_cli("send", *args, "--json")
    assert done.exit_code == 0, done.stderr
    return dict(json.loads(done.stdout))


def shown(run_id: str) -> dict[str, Any]:
    return dict(json.loads(run_cli("runs", "show", run_id, "--json").stdout))


def ended(run_id: str, within: float = 30.0) -> dict[str, Any]:
    return eventually(
        lambda: shown(run_id),
        lambda run: run["state"] in ("completed", "failed", "cancelled", "expired"),
        within=within,
        what=lambda run: f"run {run_id} still {run['state']}",
    )


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def last_user(body: dict[str, Any]) -> str:
    return str(next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user"))


def test_the_openai_engine_records_the_step_that_read_each_message(initialised: Path) -> None:
    with ScriptedModel([{"content": "the first answer", "delay": 2.0}, "both answered"]) as model:
        make_openai_profile(initialised, model.base_url)
        with gateway_with(initialised):
            first = sent("coder", "build it", "--wait", "0")
            eventually(lambda: shown(first["run_id"]), lambda r: r["state"] == "running", within=30, what="running")
            steered = sent("coder", "and test it", "--steer")
            assert steered["landed"] == "steered" and steered["reply"] == "both answered", steered
            own = ended(first["run_id"])
        first_call, second_call = model.requests
    mark = own["consumed"]
    assert mark["turn"] == first["run_id"] and mark["step"] == 1, own
    assert mark["digest"] == digest(last_user(first_call))  # the text the model call carried
    joined = shown(steered["run_id"])["consumed"]
    assert joined["turn"] == first["run_id"] and joined["step"] == 2, joined  # read by the turn's second call
    assert joined["digest"] == digest(last_user(second_call)) != mark["digest"]
    assert own["created_at"] <= mark["at"] <= joined["at"] <= own["finished_at"]
    text = run_cli("runs", "show", steered["run_id"]).stdout
    assert f"consumed (step 2 of turn {first['run_id']})" in text, text
    ledger = run_cli("ledger", "--wide").stdout
    assert "READ" in ledger and "step 2" in ledger and "step 1" in ledger, ledger


def test_the_echo_engine_consumes_in_the_turn_itself(initialised: Path) -> None:
    assert run_cli("profile", "create", "builds").exit_code == 0
    done = sent("builds", "hello")
    assert done["result"] == "delivered" and done["consumed"]["turn"] == done["run_id"], done
    assert done["consumed"]["step"] == 1 and done["consumed"]["digest"] == digest("hello")
    record = shown(done["run_id"])
    assert record["consumed"] == done["consumed"]


def test_a_turn_that_fails_before_its_model_answers_is_not_consumed_and_its_sender_is_told(
    initialised: Path,
) -> None:
    make_openai_profile(initialised, f"http://127.0.0.1:{free_port()}/v1")  # nothing listens: no model call lands
    assert run_cli("profile", "create", "lead").exit_code == 0
    set_messaging(initialised, "lead", allow=["coder"])
    failing = run_cli("send", "coder", "are you there?", "--json")
    assert failing.exit_code == 1
    error = json.loads(failing.stdout)["error"]
    assert "consumed" in error and error["consumed"] is None, error
    text = run_cli("send", "coder", "are you there?")
    assert NOT_CONSUMED in text.stderr, text.stderr
    with gateway_with(initialised):
        call = {"session_id": "coder", "message": "ping from lead", "wait_seconds": 0}
        asked = sent("lead", "/tool send_to_session " + json.dumps(call))
        receipt = json.loads(asked["reply"].split("→ send_to_session: ", 1)[1])
        run = ended(receipt["run_id"])
        assert run["result"] == "failed" and run["consumed"] is None, run
        assert NOT_CONSUMED in run_cli("runs", "show", receipt["run_id"]).stdout

        def wake() -> list[dict[str, Any]]:
            runs = json.loads(run_cli("runs", "list", "-p", "lead", "--json").stdout)
            return [r for r in runs if receipt["run_id"] in r["message"] and "[Reply to your message" in r["message"]]

        woken = eventually(wake, within=30, what="lead's wake")
    assert NOT_CONSUMED in woken[0]["message"], woken[0]["message"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    base = tmp_path_factory.mktemp("consumed-peers")
    alpha, beta = _init_home(base / "alpha"), _init_home(base / "beta")
    p = Pair(alpha, beta, peer_key(alpha.root, "beta"), peer_key(beta.root, "alpha"))
    try:
        alpha.start()
        beta.start()
        card = f"{beta.url}/.well-known/agent-card.json"
        added = cli(p.a, "peer", "add", A2A, "--url", card, "--key", p.beta_key, "--no-key-back")
        assert added.exit_code == 0, added.stderr
        added = cli(p.a, "peer", "add", HERMES, "--url", beta.url, "--key", peer_key(beta.root, "alpha-h"))
        assert added.exit_code == 0, added.stderr
        yield p
    finally:
        alpha.kill()
        beta.kill()


@pytest.mark.parametrize("peer", [HERMES, A2A])
def test_a_peers_consumed_receipt_travels_back_to_the_sender(pair: Pair, peer: str) -> None:
    done = cli(pair.a, "send", f"peer:{peer}", f"hello over {peer}", "--json")
    assert done.exit_code == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["result"] == "delivered", result
    mark = result["consumed"]
    assert mark is not None and mark["step"] == 1, result
    on_beta = json.loads(cli(pair.b, "runs", "show", mark["turn"], "--json").stdout)
    assert on_beta["consumed"] == mark  # beta's own record, carried back whole
    assert on_beta["message"] == f"hello over {peer}"
    failed = cli(pair.a, "send", f"peer:{peer}", "/fail on purpose", "--json")
    said = json.loads(failed.stdout)
    assert said["result"] == "failed" and "consumed" in said and said["consumed"] is None, said
    text = cli(pair.a, "send", f"peer:{peer}", "/fail again")
    assert "not consumed" in text.stderr, text.stderr
