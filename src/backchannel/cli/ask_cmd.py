"""`backchannel ask list | show ID | answer ID TEXT | cancel ID`: the questions agents' turns asked you.

A turn that asks (`ask_person`) ends with its run `input_required`; your answer (or a decline, or the question's
default once it expires) puts the same run back in its session's queue, and its next turn reads the answer. Every
command goes through the one client: the running gateway, else this home's opened here.
"""

from __future__ import annotations

import asyncio
import sys
import urllib.parse
from typing import Any

import click

from ..home import config
from .connect import request
from .output import WIDE_HELP, emit, examples, note, table, when

ASKED_FROM = {"X-Backchannel-Sender": "human:cli"}  # who answered, as the question records it
STATES = ("open", "answered", "defaulted", "cancelled", "any")


@click.group("ask")
def ask() -> None:
    """Questions agents asked you: list, show, answer, cancel.

    An agent's turn that asks you (the ask_person tool) waits for your answer; the answer resumes the same run, its
    next message. A question is answered once: the first answer, from any surface, wins."""


def _path(question_id: str) -> str:
    return f"/v1/questions/{urllib.parse.quote(question_id, safe='')}"


def _call(method: str, path: str, body: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    config.require_home(config.home())
    return asyncio.run(request(method, path, body, headers=ASKED_FROM if body is not None else None))


@ask.command("list", epilog=examples("backchannel ask list", "backchannel ask list --state any --json"))
@click.option("--state", type=click.Choice(STATES), default="open", show_default=True, help="Only these.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.option("--wide", is_flag=True, help=WIDE_HELP)
def list_(state: str, as_json: bool, wide: bool) -> None:
    """Questions waiting for you (or in --state), oldest first."""
    body, _ = _call("GET", f"/v1/questions?state={state}")
    rows: list[dict[str, Any]] = body.get("data", [])

    def text() -> None:
        if not rows:
            note("no questions are open" if state == "open" else f"no questions ({state})")
            return
        table(
            [
                [q["id"], f"{q['profile']}/{q['session_id']}", q["state"], when(q["expires_at"]), _asked(q)]
                for q in rows
            ],
            ["QUESTION", "FROM", "STATE", "EXPIRES", "ASKS"],
            fit=("ASKS", "FROM"),
            drop=("EXPIRES",),
            wide=wide,
        )
        if state == "open":
            note("answer with `backchannel ask answer QUESTION TEXT`, decline with `backchannel ask cancel QUESTION`")

    emit(rows, as_json=as_json, text=text)


def _asked(q: dict[str, Any]) -> str:
    first = str(q.get("question") or "").strip().splitlines()
    choices = f" [{' / '.join(q['choices'])}]" if q.get("choices") else ""
    return (first[0][:80] if first else "") + choices


@ask.command("show", epilog=examples("backchannel ask show q_0123…", "backchannel ask show q_0123… --json"))
@click.argument("question_id")
@click.option("--json", "as_json", is_flag=True, help="Print the question as JSON.")
def show(question_id: str, as_json: bool) -> None:
    """One question and its answer.

    Who asks, what, the choices and default, its state and answer."""
    body, _ = _call("GET", _path(question_id))

    def text() -> None:
        lines = [
            ("question", body["question"]),
            ("from", f"{body['profile']}/{body['session_id']} (run {body['run_id']}, for {body['asker']})"),
            ("choices", ", ".join(body["choices"]) if body.get("choices") else None),
            ("default", body.get("default")),
            ("expires", when(body["expires_at"]) if body.get("expires_at") else None),
            ("state", body["state"]),
            ("answer", body.get("answer")),
            ("by", body.get("answered_by")),
        ]
        for name, value in lines:
            if value is not None:
                click.echo(f"{name + ':':<10}{value}")

    emit(body, as_json=as_json, text=text)


@ask.command(
    "answer",
    epilog=examples("backchannel ask answer q_0123… blue", "backchannel ask answer q_0123… 'yes, go ahead' --json"),
)
@click.argument("question_id")
@click.argument("text", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the question and its run as JSON.")
def answer(question_id: str, text: tuple[str, ...], as_json: bool) -> None:
    """Answer a question; its run resumes.

    The same run is queued again, your answer its next message."""
    _closed(_call("POST", _path(question_id), {"answer": " ".join(text)}), as_json)


@ask.command("cancel", epilog=examples("backchannel ask cancel q_0123…"))
@click.argument("question_id")
@click.option("--json", "as_json", is_flag=True, help="Print the question and its run as JSON.")
def cancel(question_id: str, as_json: bool) -> None:
    """Decline a question; its run goes on.

    Its turn is told you declined (`backchannel runs stop RUN` ends the run itself)."""
    _closed(_call("POST", _path(question_id), {"cancel": True}), as_json)


def _closed(answered: tuple[dict[str, Any], str], as_json: bool) -> None:
    body, via = answered
    run = body.get("run") or {}
    said = "declined" if body["state"] == "cancelled" else body["state"]
    line = f"{body['id']}: {said}; run {run.get('run_id')} {run.get('status')}"
    if body.get("from_peer"):  # a peer's agent asked: the answer went to that peer, whose run goes on there
        line = f"{body['id']}: {said}; sent to {body['profile']} (its run {body['run_id']})"
    emit(body, as_json=as_json, text=lambda: click.echo(line))
    if via == "local" and not as_json:
        note("no gateway is running: the run resumes when `backchannel gateway` starts")
    sys.exit(0)
