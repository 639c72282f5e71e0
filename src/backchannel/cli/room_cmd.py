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
from . import complete
from .connect import find_gateway, home_gateway, on_home
from .output import emit, examples, note, read_message, table, when

if TYPE_CHECKING:
    from ..core.gateway import Gateway
    from ..core.rooms import Rooms
    from ..transcript import Line, Room

LOOK_SECONDS = 0.25  # how often `room say` looks at the transcript
DEFAULT_WAIT = 600.0
ROOM_SAY_SENDER = "human:cli"


@click.group("room")
def room() -> None:
    """Rooms: you and several agents in one transcript.

    \b
    Each member answers in turn what was said since its last turn, in a room session of its own; a member
    hands the floor to another by naming it (@research). Members on other gateways take part as peers.
    """


def _room_dict(r: Room) -> dict[str, Any]:
    return {"name": r.name, "members": list(r.members), "created_at": r.created_at}


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
    made = on_home(config.home(), lambda g: g.rooms.create(name, list(members)))
    click.echo(f"room {made.name}: {', '.join(made.members) or 'no members yet'}")


@room.command("add", epilog=examples("backchannel room add standup assistant"))
@click.argument("name", shell_complete=complete.rooms)
@click.argument("members", nargs=-1, required=True)
def add(name: str, members: tuple[str, ...]) -> None:
    """Add MEMBERS to room NAME (they speak after the others)."""
    now = on_home(config.home(), lambda g: g.rooms.add(name, list(members)))
    click.echo(f"room {now.name}: {', '.join(now.members)}")


@room.command("remove", epilog=examples("backchannel room remove standup builds"))
@click.argument("name", shell_complete=complete.rooms)
@click.argument("members", nargs=-1, required=True)
def remove(name: str, members: tuple[str, ...]) -> None:
    """Remove MEMBERS from room NAME (the transcript keeps what they said)."""
    now = on_home(config.home(), lambda g: g.rooms.remove(name, list(members)))
    click.echo(f"room {now.name}: {', '.join(now.members) or 'no members left'}")


@room.command("list", epilog=examples("backchannel room list --json"))
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")
def list_(as_json: bool) -> None:
    """The rooms and their members."""
    found = on_home(config.home(), lambda g: g.rooms.every())

    def text() -> None:
        table([[r.name, ", ".join(r.members), when(r.created_at)] for r in found], ["ROOM", "MEMBERS", "CREATED"])
        if not found:
            note("no rooms: make one with `backchannel room create NAME --member PROFILE`")

    emit([_room_dict(r) for r in found], as_json=as_json, text=text)


@room.command("show", epilog=examples("backchannel room show standup", "backchannel room show standup --json"))
@click.argument("name", shell_complete=complete.rooms)
@click.option("--json", "as_json", is_flag=True, help="Print the room and its transcript as JSON.")
def show(name: str, as_json: bool) -> None:
    """Room NAME's transcript, in order.

    Who said what, with each answer's state (running, completed, failed)."""

    async def read(g: Gateway) -> tuple[Room, list[Line]]:
        return await g.rooms.get(name), await g.rooms.transcript(name)

    found, lines = on_home(config.home(), read)

    def text() -> None:
        click.echo(f"room {found.name}: {', '.join(found.members) or 'no members'}")
        for line in lines:
            _print_line(line)
        if not lines:
            note(f"nothing said yet: backchannel room say {found.name} MESSAGE")

    emit({**_room_dict(found), "lines": [line.to_dict() for line in lines]}, as_json=as_json, text=text)


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
        client = await find_gateway(root)
        if client is not None:  # the running gateway drives the room: this command writes and reads the store
            await client.aclose()
            async with home_gateway(root) as g:
                return await _said(g.rooms, name, text.strip(), wait=wait, quiet=as_json)
        from ..core.gateway import running

        async with running(root, scope=set(), grace=1.0) as g:
            return await _said(g.rooms, name, text.strip(), wait=wait, quiet=as_json, drive=True)

    lines, done = asyncio.run(go())
    emit({"room": name, "done": done, "lines": [line.to_dict() for line in lines]}, as_json=as_json, text=lambda: None)
    if not done and not as_json:
        note(f"the room goes on: backchannel room show {name}")
    sys.exit(1 if any(line.state not in ("said", "completed", "running") for line in lines) else 0)


async def _said(
    rooms: Rooms, name: str, text: str, *, wait: float, quiet: bool, drive: bool = False
) -> tuple[list[Line], bool]:
    """Say `text`, then print the round's lines as each is done, until the round ends or `wait` passes."""
    said, round_ = await rooms.say(name, text, sender=ROOM_SAY_SENDER)
    if drive:
        rooms.start(name)
    deadline = time.monotonic() + wait
    shown: dict[int, str] = {}
    while True:
        now = await rooms.round(round_.id)
        lines = [line for line in await rooms.transcript(name, after=said.seq) if line.round == round_.id]
        for line in lines:
            if line.state != "running" and shown.get(line.seq) != line.state:
                shown[line.seq] = line.state
                if not quiet:
                    _print_line(line, stamp=False)
        if now.state == "done":
            return [said, *lines], True
        if time.monotonic() >= deadline:
            return [said, *lines], False
        await asyncio.sleep(LOOK_SECONDS)


def _print_line(line: Line, *, stamp: bool = True) -> None:
    at = dt.datetime.fromtimestamp(line.created_at).strftime("%H:%M:%S") + "  " if stamp else ""
    state = "" if line.state in ("said", "completed") else f"  ({line.state}{': ' + line.error if line.error else ''})"
    who = "you" if line.speaker.startswith("human:") else line.speaker
    click.echo(f"{at}[{who}]{state}")
    if line.text:
        click.echo(line.text)
