"""A peer's question (issue 42), across two real gateways on loopback: alpha's person sends to beta's agent, whose
turn asks (the echo engine's `/ask`).

- On beta, the question is alpha's (the run's sender `peer:alpha/...`): never in beta's person's open questions,
  listed with `for_peer=true`, refused to beta's person; alpha answers it (A2A: a message naming the task; the
  Hermes dialect: `POST /v1/runs/{id}/answer`).
- On alpha, the question becomes alpha's person's own (`ask list`, `from_peer`); `ask answer` relays the answer to
  beta, whose run goes on to its reply, which `peer status` shows.
- When alpha's agent sent the run (`send_to_peer`), the question is that agent's: out of alpha's person's list, it
  answers with `send_to_peer` and the run's id, by the same relay and rules, and the reply comes into its session.
Over A2A (beta added by its agent card) and over the Backchannel (Hermes-dialect) link (beta added by its URL)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import GatewayProcess
from polling import eventually
from test_peers_e2e import Pair, _init_home, api, cli, ensure_profile, ledger, messaging_rules, peer_key, tool_results

WITHIN = 30.0
A2A, HERMES = "beta", "beta-h"  # beta as alpha sees it: by its agent card, by its URL


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    base = tmp_path_factory.mktemp("peer-questions")
    alpha, beta = _init_home(base / "alpha"), _init_home(base / "beta")
    p = Pair(alpha, beta, peer_key(alpha.root, "beta"), peer_key(beta.root, "alpha"))
    try:
        alpha.start()
        beta.start()
        card = f"{beta.url}/.well-known/agent-card.json"
        assert httpx.get(card, timeout=60, trust_env=False).status_code == 200
        added = cli(p.a, "peer", "add", A2A, "--url", card, "--key", p.beta_key, "--no-key-back")
        assert added.exit_code == 0, added.stderr
        added = cli(p.a, "peer", "add", HERMES, "--url", beta.url, "--key", peer_key(beta.root, "alpha-h"))
        assert added.exit_code == 0, added.stderr
        yield p
    finally:
        alpha.kill()
        beta.kill()


def _json(root: Path, *args: str) -> Any:
    result = cli(root, *args, "--json")
    assert "Traceback" not in result.stderr, result.stderr
    return json.loads(result.stdout)


def _relayed(root: Path, run_id: str) -> dict[str, Any]:
    """The open question on `root` relayed from the peer's run `run_id`."""
    found = eventually(
        lambda: [q for q in _json(root, "ask", "list") if q["run_id"] == run_id],
        within=WITHIN,
        what=f"the question of the peer's run {run_id}",
    )
    assert len(found) == 1, found
    return dict(found[0])


def _beta_run(beta: GatewayProcess, run_id: str, state: str) -> dict[str, Any]:
    with api(beta) as c:
        return dict(
            eventually(
                lambda: c.get(f"/v1/runs/{run_id}").json(),
                lambda r: r.get("status") == state,
                within=WITHIN,
                what=f"beta's run {run_id} {state}",
            )
        )


def _answered_on_alpha(pair: Pair, peer: str, question: dict[str, Any], answer: str) -> None:
    """Alpha's person answers the relayed question; beta's run completes with it; `peer status` shows the reply."""
    run_id = question["run_id"]
    answered = cli(pair.a, "ask", "answer", question["id"], answer)
    assert answered.exit_code == 0, answered.stderr
    assert f"{question['id']}: answered; sent to peer:{A2A}" in answered.stdout or peer == HERMES, answered.stdout
    assert f"(its run {run_id})" in answered.stdout, answered.stdout
    done = eventually(
        lambda: _json(pair.a, "peer", "status", peer, run_id),
        lambda s: s.get("status") == "completed",
        within=WITHIN,
        what=f"run {run_id} completed on beta",
    )
    assert done["result"] == "delivered" and done["output"] == f"default (echo): {answer}", done
    shown = cli(pair.a, "peer", "status", peer, run_id)
    assert shown.exit_code == 0 and f"default (echo): {answer}" in shown.stdout, shown.stdout
    closed = _json(pair.a, "ask", "show", question["id"])
    assert closed["state"] == "answered" and closed["answer"] == answer and closed["from_peer"] is True, closed
    assert not [q for q in _json(pair.a, "ask", "list") if q["run_id"] == run_id]


def test_a_peers_question_over_a2a_is_our_persons_and_their_answer_goes_back(pair: Pair) -> None:
    dm = _json(pair.a, "peer", "dm", A2A, "/ask Which colour? | red, blue | blue | 600", "--wait", "30")
    assert dm["result"] == "receipt" and dm["state"] == "input_required", dm
    assert dm["question"] == "Which colour?", dm
    text = cli(pair.a, "peer", "status", A2A, dm["run_id"])
    assert text.exit_code == 0 and text.stdout.splitlines()[:2] == [
        f"{dm['run_id']}: input_required",
        "it asks: Which colour?",
    ], text.stdout
    question = _relayed(pair.a, dm["run_id"])
    assert question["from_peer"] is True and question["for_peer"] is False, question
    assert question["profile"] == f"peer:{A2A}" and question["asker"] == "human:cli", question
    assert question["question"] == "Which colour?" and question["state"] == "open", question
    listed = cli(pair.a, "ask", "list")
    assert question["id"] in listed.stdout and "Which colour?" in listed.stdout, listed.stdout

    # on beta the question is alpha's: not its person's
    assert not [q for q in _json(pair.b, "ask", "list") if q["run_id"] == dm["run_id"]]
    _answered_on_alpha(pair, A2A, question, "red")


def test_a_run_a_peer_sent_asks_that_peer_never_our_person(pair: Pair) -> None:
    started = _json(pair.a, "peer", "run", A2A, "/ask Proceed? | yes, no | no | 600")
    run_id = started["run_id"]
    waiting = _beta_run(pair.beta, run_id, "input_required")
    assert waiting["question"]["question"] == "Proceed?" and waiting["question"]["for_peer"] is True, waiting

    with api(pair.beta) as c:
        mine = c.get("/v1/questions").json()["data"]
        assert not [q for q in mine if q["run_id"] == run_id], mine
        theirs = [q for q in c.get("/v1/questions?for_peer=true").json()["data"] if q["run_id"] == run_id]
        assert len(theirs) == 1 and theirs[0]["asker"] == "peer:alpha/default", theirs
        assert c.get("/v1/questions?for_peer=bogus").status_code == 400
        refused = c.post(f"/v1/questions/{theirs[0]['id']}", json={"answer": "yes"})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "question_for_peer", refused.text
    cli_refused = cli(pair.b, "ask", "answer", theirs[0]["id"], "yes")
    assert cli_refused.exit_code != 0 and "that peer answers it" in cli_refused.stderr, cli_refused.stderr

    status = _json(pair.a, "peer", "status", A2A, run_id)  # alpha follows it: the question is its person's
    assert status["status"] == "input_required" and status["result"] == "receipt", status
    _answered_on_alpha(pair, A2A, _relayed(pair.a, run_id), "yes")
    with api(pair.beta) as c:
        closed = c.get(f"/v1/questions/{theirs[0]['id']}").json()
    assert closed["state"] == "answered" and closed["answered_by"] == "peer:alpha", closed


def test_a_peers_question_over_the_backchannel_link(pair: Pair) -> None:
    started = _json(pair.a, "peer", "run", HERMES, "/ask Tea or coffee? | tea, coffee | tea | 600")
    run_id = started["run_id"]
    _beta_run(pair.beta, run_id, "input_required")
    status = _json(pair.a, "peer", "status", HERMES, run_id)
    assert status["status"] == "input_required" and status["result"] == "receipt", status
    assert status["question"]["question"] == "Tea or coffee?", status
    question = _relayed(pair.a, run_id)
    assert question["profile"] == f"peer:{HERMES}" and question["from_peer"] is True, question
    _answered_on_alpha(pair, HERMES, question, "coffee")

    with api(pair.beta) as c:  # beta's person may not answer the question of a run a peer sent, even by its route
        again = c.post(f"/v1/runs/{run_id}/answer", json={"answer": "tea"})
    assert again.status_code == 403 and again.json()["error"]["code"] == "question_for_peer", again.text


def test_a_relayed_question_closes_when_the_peers_run_goes_on_without_it(pair: Pair) -> None:
    dm = _json(pair.a, "peer", "dm", A2A, "/ask Left or right? | left, right | right | 1", "--wait", "30")
    assert dm["state"] == "input_required" and dm["question"] == "Left or right?", dm
    question = _relayed(pair.a, dm["run_id"])
    _beta_run(pair.beta, dm["run_id"], "completed")  # its default taken at its expiry, on beta
    done = _json(pair.a, "peer", "status", A2A, dm["run_id"])
    assert done["status"] == "completed" and done["output"] == "default (echo): right", done
    closed = _json(pair.a, "ask", "show", question["id"])
    assert closed["state"] == "cancelled" and closed["answered_by"] == f"peer:{A2A}", closed
    late = cli(pair.a, "ask", "answer", question["id"], "left")
    assert late.exit_code == 2, late.stderr
    assert _json(pair.a, "ask", "answer", question["id"], "left")["error"]["code"] == "question_closed"


def _agent_sends(root: Path, profile: str, **args: Any) -> dict[str, Any]:
    """Alpha's agent `profile` calls send_to_peer with `args` (a turn of its Bot Chat); that call's result."""
    said = cli(root, "send", profile, f"/tool send_to_peer {json.dumps(args)}", "--json")
    assert said.exit_code == 0, said.stderr
    (result,) = tool_results(json.loads(said.stdout)["reply"], "send_to_peer")
    return result


@pytest.mark.parametrize("peer", [A2A, HERMES])
def test_an_agent_answers_the_question_a_peers_agent_asks_it(pair: Pair, peer: str) -> None:
    ensure_profile(pair.a, "other")
    size = f"/ask Which size for {peer}? | S, M | S | 600"
    with messaging_rules(pair.a, "default", allow=[f"peer:{peer}"]), messaging_rules(pair.a, "other", allow=["peer:*"]):
        asked = _agent_sends(pair.a, "default", target=peer, message=size, wait_seconds=30)
        assert asked["result"] == "receipt" and asked["state"] == "input_required", asked
        assert asked["question"] == f"Which size for {peer}?" and "send_to_peer" in asked["note"], asked
        run_id = asked["run_id"]
        # the question is the agent's: not in alpha's person's list, and no other agent of alpha's answers it
        assert not [q for q in _json(pair.a, "ask", "list") if q["run_id"] == run_id]
        theirs = _agent_sends(pair.a, "other", target=peer, message="S", run_id=run_id)
        assert theirs["result"] == "refused" and theirs["error"]["code"] == "not_found", theirs

        answered = _agent_sends(pair.a, "default", target=peer, message="M", run_id=run_id)
        assert answered["result"] == "receipt" and answered["run_id"] == run_id, answered
        done = _beta_run(pair.beta, run_id, "completed")
        assert done["output"] == "default (echo): M", done  # the answer reached beta's run, which went on with it
        again = _agent_sends(pair.a, "default", target=peer, message="S", run_id=run_id)
        assert again["result"] == "refused" and again["error"]["code"] == "question_closed", again

        plain = _agent_sends(pair.a, "default", target=peer, message=f"no question here, {peer}", wait_seconds=30)
        assert plain["result"] == "delivered", plain
        none = _agent_sends(pair.a, "default", target=peer, message="M", run_id=plain["run_id"])
        assert none["result"] == "refused" and none["error"]["code"] == "question_not_asked", none

    with api(pair.alpha) as c:  # kept as alpha's person's relayed questions are: answered once, by the agent
        every = c.get("/v1/questions", params={"state": "answered", "for_peer": "any"}).json()["data"]
    closed = [q for q in every if q["run_id"] == run_id]
    assert [(q["answer"], q["answered_by"].split("/")[0], q["from_peer"]) for q in closed] == [("M", "default", True)]
    # beta's reply comes into the sending agent's session as any late reply does
    eventually(
        lambda: [e for e in ledger(pair.a) if e["kind"] == "run" and "default (echo): M" in e["message"]],
        within=WITHIN,
        what="the reply of beta's run woke alpha's agent",
    )
    # the agent read the question in its send's result: no wake-up tells it again
    assert not _question_wakes(pair.a, run_id)


def _question_wakes(root: Path, run_id: str) -> list[dict[str, Any]]:
    """The wake-ups on `root` that bring the question the peer's run `run_id` asks."""
    heading = f"[Question about your message {run_id} "
    return [e for e in ledger(root) if e["kind"] == "run" and heading in e["message"]]


@pytest.mark.parametrize("peer", [A2A, HERMES])
def test_a_peers_question_after_the_receipt_wakes_the_agent_that_sent_the_message(pair: Pair, peer: str) -> None:
    question = f"Which lane for {peer}?"
    with messaging_rules(pair.a, "default", allow=[f"peer:{peer}"]):
        sent = _agent_sends(
            pair.a,
            "default",
            target=peer,
            message=f"/sleep 2\n/ask {question} | left, right | left | 600",
            wait_seconds=0,
        )  # it asks after the receipt
        assert sent["result"] == "receipt" and sent.get("state") != "input_required", sent
        run_id = sent["run_id"]
        _beta_run(pair.beta, run_id, "input_required")
        (woken,) = eventually(
            lambda: _question_wakes(pair.a, run_id),
            within=WITHIN,
            what=f"the question of beta's run {run_id} woke alpha's agent",
        )
        assert question in woken["message"] and f"run_id {run_id}]" in woken["message"], woken
        assert "send_to_peer" in woken["message"] and woken["target"].startswith("default/"), woken
        assert not [q for q in _json(pair.a, "ask", "list") if q["run_id"] == run_id]  # the agent's, not the person's

        answered = _agent_sends(pair.a, "default", target=peer, message="right", run_id=run_id)
        assert answered["result"] == "receipt" and answered["run_id"] == run_id, answered
        done = _beta_run(pair.beta, run_id, "completed")
        assert done["output"] == "default (echo): right", done
        eventually(
            lambda: [e for e in ledger(pair.a) if e["kind"] == "run" and "default (echo): right" in e["message"]],
            within=WITHIN,
            what="the reply of beta's run woke alpha's agent",
        )
    assert len(_question_wakes(pair.a, run_id)) == 1  # told once, however many polls saw it asked
