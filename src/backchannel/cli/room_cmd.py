"""`backchannel room create | say | show | list | add | remove`: a person and several agents in one transcript."""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
import time
from typing import TYPE_CHECKING, Any

import click

from ..errors import UsageError
from ..home import config
from ..net.http import quote
from . import complete
from .connect import call, gateway_link
from .output import WIDE_HELP, emit, examples, note, read_message, table, when

if TYPE_CHECKING:
    from ..net.local import GatewayClient

Line = dict[str, Any]  # a line of a room's transcript, as the gateway answers it (`transcript.Line.to_dict`)

LOOK_SECONDS = 0.25  # how often `room say` looks at the transcript
DEFAULT_WAIT = 600.0
SAID_FROM = {"X-Backchannel-Sender": "human:cli"}  # the person's line, as said from the CLI


@click.group("room")
def room() -> None:
    """Rooms: you and several agents in one transcript.

    \b
    Each member answers in turn what was said since its last turn, in a room session of its own; a member
    hands the floor to another by naming it (@research). Members on other gateways take part as peers.
    """


def _room(name: str) -> str:
    return f"/v1/rooms/{quote(name)}"


@room.command(
    "create",
    epilog=examples(
        "backchannel room create standup --member research --member builds",
        "backchannel room create ops --member builds --member peer:spark/ops",
    ),
)
@click.argument("name")
@click.option("--member", "members", multiple=True, metavar="ADDRESS", help="A member (repeatable), in speaking order.")
def create(name: str, members: tuple[str, ...]) -> None:
    """Make room NAME with its members.

    Each --member is a profile, profile/session-id, or peer:NAME[/AGENT], in the order they speak."""
    made = call("POST", "/v1/rooms", {"name": name, "members": list(members)})
    click.echo(f"room {made['name']}: {', '.join(made['members']) or 'no members yet'}")


@room.command("add", epilog=examples("backchannel room add standup assistant"))
@click.argument("name", shell_complete=complete.rooms)
@click.argument("members", nargs=-1, required=True)
def add(name: str, members: tuple[str, ...]) -> None:
    """Add MEMBERS to room NAME (they speak after the others)."""
    now = call("POST", f"{_room(name)}/members", {"members": list(members)})
    click.echo(f"room {now['name']}: {', '.join(now['members'])}")


@room.command("remove", epilog=examples("backchannel room remove standup builds"))
@click.argument("name", shell_complete=complete.rooms)
@click.argument("members", nargs=-1, required=True)
def remove(name: str, members: tuple[str, ...]) -> None:
    """Remove MEMBERS from room NAME (the transcript keeps what they said)."""
    now = call("POST", f"{_room(name)}/members/remove", {"members": list(members)})
    click.echo(f"room {now['name']}: {', '.join(now['members']) or 'no members left'}")


@room.command("list", epilog=examples("backchannel room list --json"))
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")
@click.option("--wide", is_flag=True, help=WIDE_HELP)
def list_(as_json: bool, wide: bool) -> None:
    """The rooms and their members."""
    found: list[dict[str, Any]] = call("GET", "/v1/rooms")["rooms"]

    def text() -> None:
        rows = [[r["name"], ", ".join(r["members"]), when(r["created_at"])] for r in found]
        table(rows, ["ROOM", "MEMBERS", "CREATED"], fit=("MEMBERS",), wide=wide)
        if not found:
            note("no rooms: make one with `backchannel room create NAME --member PROFILE`")

    emit(found, as_json=as_json, text=text)


@room.command("show", epilog=examples("backchannel room show standup", "backchannel room show standup --json"))
@click.argument("name", shell_complete=complete.rooms)
@click.option("--json", "as_json", is_flag=True, help="Print the room and its transcript as JSON.")
def show(name: str, as_json: bool) -> None:
    """Room NAME's transcript, in order.

    Who said what, with each answer's state (running, completed, failed)."""

    found = call("GET", _room(name))
    lines: list[Line] = found["lines"]

    def text() -> None:
        click.echo(f"room {found['name']}: {', '.join(found['members']) or 'no members'}")
        for line in lines:
            _print_line(line)
        if not lines:
            note(f"nothing said yet: backchannel room say {found['name']} MESSAGE")

    emit(found, as_json=as_json, text=text)


@room.command(
    "say",
    epilog=examples("backchannel room say standup 'what is left for the release?'", "backchannel room say standup -"),
)
@click.argument("name", shell_complete=complete.rooms)
@click.argument("message", required=False)
@click.option(
    "--wait",
    type=click.FloatRange(0, 86_400),
    default=DEFAULT_WAIT,
    show_default=True,
    help="Seconds to wait for every member's answer; past it, the room goes on (see `room show`).",
)
@click.option("--json", "as_json", is_flag=True, help="At the end, print the lines of this round as JSON.")
def say(name: str, message: str | None, wait: float, as_json: bool) -> None:
    """Say MESSAGE in room NAME; print each answer as it comes.

    MESSAGE is the argument, or stdin ('-', or none with stdin not a terminal). Exits 0 once every member
    answered (or the room goes on past --wait), 1 when an answer failed. Without a running gateway, this
    command drives the room itself until the round ends.
    """
    text = read_message(message)
    if not text or not text.strip():
        raise UsageError("no message: give it as an argument, or '-' to read stdin")
    root = config.home()

    async def go() -> tuple[list[Line], bool]:
        async with gateway_link(root) as link:  # none running: this command's own gateway drives the round
            return await _said(link.client, name, text.strip(), wait=wait, quiet=as_json)

    lines, done = asyncio.run(go())
    emit({"room": name, "done": done, "lines": lines}, as_json=as_json, text=lambda: None)
    if not done and not as_json:
        note(f"the room goes on: backchannel room show {name}")
    sys.exit(1 if any(line["state"] not in ("said", "completed", "running") for line in lines) else 0)


async def _said(client: GatewayClient, name: str, text: str, *, wait: float, quiet: bool) -> tuple[list[Line], bool]:
    """Say `text`, then print the round's lines as each is done, until the round ends or `wait` passes."""
    path = _room(name)
    opened = (await client.request("POST", f"{path}/messages", json={"message": text}, headers=SAID_FROM)).body
    said, round_path = opened["line"], f"{path}/rounds/{quote(opened['round'])}"
    deadline = time.monotonic() + wait
    shown: dict[int, str] = {}
    while True:
        now = (await client.request("GET", round_path)).body
        lines: list[Line] = now["lines"]
        for line in lines:
            if line["state"] != "running" and shown.get(line["seq"]) != line["state"]:
                shown[line["seq"]] = line["state"]
                if not quiet:
                    _print_line(line, stamp=False)
        if now["state"] == "done":
            return [said, *lines], True
        if time.monotonic() >= deadline:
            return [said, *lines], False
        await asyncio.sleep(LOOK_SECONDS)


def _print_line(line: Line, *, stamp: bool = True) -> None:
    at = dt.datetime.fromtimestamp(line["at"]).strftime("%H:%M:%S") + "  " if stamp else ""
    state, error = line["state"], line["error"]
    shown = "" if state in ("said", "completed") else f"  ({state}{': ' + error if error else ''})"
    who = "you" if line["speaker"].startswith("human:") else line["speaker"]
    click.echo(f"{at}[{who}]{shown}")
    if line["text"]:
        click.echo(line["text"])
