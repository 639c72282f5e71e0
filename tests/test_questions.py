"""Ask the person (issue 42): a turn's `ask_person` parks its run `input_required` with one durable question; the
person's answer (CLI or HTTP), the default at expiry, or a decline resumes the SAME run, the answer its next message.
Driven as a person would: the CLI, and HTTP against a real gateway (the `gateway` fixture), on a temporary home."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest

from conftest import GatewayThread, run_cli
from polling import eventually

WITHIN = 20.0


def _json(*args: str) -> Any:
    result = run_cli(*args, "--json")
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return json.loads(result.stdout)


def _ask(message: str) -> dict[str, Any]:
    """Send `message` to default as the person, without waiting; the question its turn asks."""
    sent = _json("send", "default", message, "--wait", "0")
    run_id = sent["run_id"]
    asked = eventually(
        lambda: [q for q in _json("ask", "list") if q["run_id"] == run_id],
        within=WITHIN,
        what=f"the question of run {run_id}",
    )
    assert len(asked) == 1, asked
    return dict(asked[0])


def _run(run_id: str) -> dict[str, Any]:
    return dict(_json("runs", "show", run_id))


def _ended(run_id: str) -> dict[str, Any]:
    return dict(
        eventually(
            lambda: _run(run_id),
            lambda r: r["state"] not in ("queued", "running", "input_required"),
            within=WITHIN,
            what=f"run {run_id} ended",
        )
    )


def test_a_question_answered_from_the_cli_resumes_the_same_run(gateway: GatewayThread) -> None:
    question = _ask("/ask Which colour? | red, blue | blue")
    assert question["question"] == "Which colour?" and question["choices"] == ["red", "blue"], question
    assert question["default"] == "blue" and question["state"] == "open" and question["asker"] == "human:cli"
    run = _run(question["run_id"])
    assert run["state"] == "input_required" and run.get("reply") is None and run["result"] == "receipt", run
    shown = run_cli("ask", "show", question["id"])
    assert shown.exit_code == 0 and "Which colour?" in shown.stdout and "red, blue" in shown.stdout, shown.stdout
    listed = run_cli("ask", "list")
    assert question["id"] in listed.stdout and "Which colour?" in listed.stdout, listed.stdout

    answered = run_cli("ask", "answer", question["id"], "red")
    assert answered.exit_code == 0, answered.stderr
    assert f"{question['id']}: answered; run {question['run_id']} queued" in answered.stdout, answered.stdout
    done = _ended(question["run_id"])
    assert done["state"] == "completed" and done["reply"] == "default (echo): red", done
    closed = _json("ask", "show", question["id"])
    assert closed["state"] == "answered" and closed["answer"] == "red" and closed["answered_by"] == "human:cli"
    assert _json("ask", "list") == []  # no question open any more

    again = run_cli("ask", "answer", question["id"], "blue")  # answered once: the second changes nothing
    assert again.exit_code == 2 and "is answered already (by human:cli)" in again.stderr, again.stderr
    closed_json = run_cli("ask", "answer", question["id"], "blue", "--json")
    assert json.loads(closed_json.stdout)["error"]["code"] == "question_closed", closed_json.stdout
    assert _json("ask", "show", question["id"])["answer"] == "red"
    unknown = run_cli("ask", "show", "q_nosuch")
    assert unknown.exit_code != 0 and "no question 'q_nosuch'" in unknown.stderr, unknown.stderr


def test_a_question_answered_over_http_resumes_the_same_run(gateway: GatewayThread) -> None:
    question = _ask("/ask Proceed?")
    url = f"{gateway.url}/v1/questions"
    listed = httpx.get(url, headers=gateway.headers(), trust_env=False)
    assert listed.status_code == 200 and [q["id"] for q in listed.json()["data"]] == [question["id"]], listed.text
    answer = httpx.post(f"{url}/{question['id']}", json={"answer": "yes, go"}, headers=gateway.headers())
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["state"] == "answered" and body["answered_by"] == "human:api", body
    assert body["run"]["run_id"] == question["run_id"] and body["run"]["status"] == "queued", body
    assert _ended(question["run_id"])["reply"] == "default (echo): yes, go"
    second = httpx.post(f"{url}/{question['id']}", json={"cancel": True}, headers=gateway.headers())
    assert second.status_code == 409 and second.json()["error"]["code"] == "question_closed", second.text


def test_a_decline_resumes_the_run_told_so(gateway: GatewayThread) -> None:
    question = _ask("/ask Shall I?")
    assert run_cli("ask", "cancel", question["id"]).exit_code == 0
    done = _ended(question["run_id"])
    assert done["state"] == "completed", done
    assert _json("ask", "show", question["id"])["state"] == "cancelled"


def test_the_default_is_taken_at_expiry(gateway: GatewayThread) -> None:
    question = _ask("/ask Tea or coffee? | tea, coffee | coffee | 1")
    done = _ended(question["run_id"])
    assert done["state"] == "completed" and done["reply"] == "default (echo): coffee", done
    closed = _json("ask", "show", question["id"])
    assert closed["state"] == "defaulted" and closed["answer"] == "coffee" and closed["answered_by"] == "expiry"


def test_no_default_at_expiry_resumes_without_an_answer(gateway: GatewayThread) -> None:
    question = _ask("/ask Anything? | | | 1")
    done = _ended(question["run_id"])
    assert done["state"] == "completed" and done["reply"] == "default (echo): ", done
    closed = _json("ask", "show", question["id"])
    assert closed["state"] == "defaulted" and closed["answer"] is None, closed


def test_a_question_survives_a_restart_of_the_gateway(gateway: GatewayThread) -> None:
    question = _ask("/ask Still there?")
    gateway.restart()
    assert _run(question["run_id"])["state"] == "input_required"
    assert [q["id"] for q in _json("ask", "list")] == [question["id"]]
    assert run_cli("ask", "answer", question["id"], "still here").exit_code == 0
    assert _ended(question["run_id"])["reply"] == "default (echo): still here"


def test_two_answers_at_once_one_wins_and_the_run_runs_once(gateway: GatewayThread) -> None:
    question = _ask("/ask One or two?")
    url = f"{gateway.url}/v1/questions/{question['id']}"
    answers: list[httpx.Response] = []
    start = threading.Barrier(2)

    def answer(text: str) -> None:
        start.wait()
        answers.append(httpx.post(url, json={"answer": text}, headers=gateway.headers(), trust_env=False))

    threads = [threading.Thread(target=answer, args=(text,)) for text in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(a.status_code for a in answers) == [200, 409], [a.text for a in answers]
    won = next(a.json()["answer"] for a in answers if a.status_code == 200)
    done = _ended(question["run_id"])
    assert done["reply"] == f"default (echo): {won}", done
    session = done["session_id"]
    messages = _json("sessions", "show", session)["messages"]
    said = [m["content"] for m in messages if m["role"] == "assistant" and m["content"]]
    assert said.count(f"default (echo): {won}") == 1, said  # its resumed turn ran once
    heard = [m["content"] for m in messages if m["role"] == "user" and m["content"].startswith("[Your person")]
    assert heard == [f"[Your person answered your question {question['id']} ('One or two?'):]\n{won}"], heard


def test_the_session_is_not_blocked_while_its_question_waits(gateway: GatewayThread) -> None:
    question = _ask("/ask Wait for me?")
    later = _json("send", "default", "meanwhile", "--wait", "30")  # the same session (the Bot Chat of default)
    assert later["result"] == "delivered" and later["reply"] == "default (echo): meanwhile", later
    assert _run(question["run_id"])["state"] == "input_required"
    assert run_cli("ask", "answer", question["id"], "now").exit_code == 0
    assert _ended(question["run_id"])["reply"] == "default (echo): now"


@pytest.mark.parametrize("bad", ["/ask Pick | a, b | c", "/ask Soon? | | | never"])
def test_a_bad_question_is_the_models_error_not_a_question(gateway: GatewayThread, bad: str) -> None:
    sent = _json("send", "default", bad, "--wait", "30")
    assert sent["result"] == "delivered" and "invalid_arguments" in sent["reply"], sent
    assert _json("ask", "list") == []
