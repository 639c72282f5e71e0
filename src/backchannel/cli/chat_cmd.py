"""`backchannel chat`: talk to an agent as its person, one message (-q) or interactively."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING

import click

from .. import keys
from ..errors import Interrupted, UsageError
from ..home import config
from ..home.profiles import DEFAULT_PROFILE
from ..net.http import quote, with_query
from ..outcome import Outcome
from . import complete
from .connect import Sent, deliver, gateway_link, interruptible, local_session
from .link import Where
from .live import STREAM_HELP, Watch, deliver_live, streams
from .output import emit, examples, note, read_message, shell_command

if TYPE_CHECKING:
    from .link_http import HttpGateway


@click.command(
    "chat",
    epilog=examples(
        "backchannel chat",
        "backchannel chat -p research -q 'what did you find?'",
        "backchannel chat -c",
        "echo 'summarise this' | backchannel chat -q - --json",
    ),
)
@click.option(
    "-p",
    "--profile",
    "profile_name",
    shell_complete=complete.profile_names,
    help="The agent to talk to (default: default, or the resumed session's).",
)
@click.option("-q", "--query", "query", help="Send one message, print the reply and exit ('-' reads stdin).")
@click.option(
    "--resume",
    "resume",
    metavar="SESSION",
    shell_complete=complete.sessions,
    help="Continue an existing session: its id, profile/id, or a profile (its Bot Chat).",
)
@click.option(
    "-c", "--continue", "last", is_flag=True, help="Continue the last session you chatted in (of -p's profile)."
)
@click.option("--json", "as_json", is_flag=True, help="With -q: print reply, session id and profile as JSON.")
@click.option("--stream/--no-stream", "stream", default=None, help=STREAM_HELP)
def chat(
    profile_name: str | None, query: str | None, resume: str | None, last: bool, as_json: bool, stream: bool | None
) -> None:
    """Talk to an agent. Without -q, a prompt that keeps one session (Ctrl-D or /exit to leave).

    Messages on stdin (-q -, or lines piped into the prompt) are read as UTF-8 (a byte order mark is dropped).
    """
    root = config.home()
    # Everything that can be refused is refused before a session is made: none is left behind empty.
    if as_json and query is None:
        raise UsageError("--json needs -q (one message)")
    live = streams(stream, as_json=as_json)
    message = None
    if query is not None:
        message = read_message(query) or ""
        if not message.strip():
            raise UsageError("the message is empty")
    if last and resume:
        raise UsageError("give --resume SESSION_ID or -c, not both")

    async def where(link: HttpGateway, resume: str | None) -> Where:
        if last:
            name = profile_name or DEFAULT_PROFILE
            listed = await link.client.request("GET", with_query(f"/p/{quote(name)}/v1/sessions", limit=200))
            mine = [s for s in listed.body["data"] if s["source"] == "cli"]
            if not mine:
                raise UsageError(f"no chat session of profile {name!r} to continue: start one with `backchannel chat`")
            resume = mine[0]["id"]
            note(f"continuing session {resume} (profile {name})")
        if resume:
            found = await local_session(link, resume)  # any local address: id, profile/id, or a Bot Chat
            if profile_name and profile_name != found.profile:
                raise UsageError(
                    f"session {found.session_id!r} belongs to profile {found.profile!r}, not {profile_name!r}"
                )
            return found
        sessions = f"/p/{quote(profile_name or DEFAULT_PROFILE)}/api/sessions"
        await link.client.request("GET", with_query(sessions, limit=1))  # an unknown profile: said before stdin
        if message is None and not sys.stdin.isatty() and not _peek_stdin():
            raise UsageError("nothing to say: stdin is empty (give -q MESSAGE, or type at a terminal)")
        made = (await link.client.request("POST", sessions, json={"source": "cli"})).body["session"]
        note(f"new session {made['id']} (profile {made['profile']})")
        return Where(made["profile"], made["id"])

    async def find() -> Where:
        async with gateway_link(root, works=False) as link:
            return await where(link, resume)

    session = asyncio.run(find())
    if message is not None:
        watch = Watch() if live else None
        sent = _turn(session, message, watch)
        emit(sent.to_dict(), as_json=as_json, text=lambda: _print(sent, watch))
        note(f"session: {session.session_id} (resume with --resume {session.session_id})")
        return
    _interactive(session, Watch() if live else None)


_pending: list[str] = []  # stdin read ahead to see that it is not empty; handed to the prompt loop


def _peek_stdin() -> bool:
    """Whether stdin (not a terminal) holds any non-blank line; what was read is kept for the loop."""
    for line in sys.stdin:
        _pending.append(line.rstrip("\n"))
        if line.strip():
            return True
    return False


def _turn(session: Where, message: str, watch: Watch | None) -> Sent:
    # A person's typed message is deliberate: a fresh key, so saying the same thing twice is two turns.
    key = keys.cli()
    again = shell_command("send", session.to, message, "--idempotency-key", key)
    root = config.home()
    with interruptible(root, again, key=key):
        if watch is None:
            return asyncio.run(deliver(root, session, message, wait=None, key=key)).check()
        try:
            sent = asyncio.run(deliver_live(root, session, message, wait=None, key=key, watch=watch))
        finally:
            watch.end_line()
        return sent.check()


def _print(sent: Sent, watch: Watch | None) -> None:
    result = sent.result
    if result.outcome is Outcome.DELIVERED:
        if watch is None or not watch.shown:
            click.echo(result.reply or "(no reply)")
    else:
        where = f", position {result.queue_position}" if result.queue_position else ""
        click.echo(f"receipt: run {result.run_id} is {result.state}{where}: accepted, do not resend")


def _interactive(session: Where, watch: Watch | None) -> None:
    """The prompt loop. Ctrl-C while a reply is awaited stops waiting for it (the message goes on as its run; how
    to follow it is said) and comes back to the prompt; Ctrl-C at the prompt drops what was typed, and a second
    one in a row leaves, as Ctrl-D and /exit do."""
    tty = sys.stdin.isatty()
    if tty:
        note(f"talking to {session.profile} in session {session.session_id}; /exit or Ctrl-D to leave")
    interrupted = False  # the last thing at the prompt was a Ctrl-C
    while True:
        try:
            line = _pending.pop(0) if _pending else input("you> " if tty else "")
        except EOFError:
            if tty:
                click.echo("", err=True)  # the prompt's line ends before the goodbye
            break
        except KeyboardInterrupt:
            click.echo("", err=True)
            if interrupted:
                break
            interrupted = True
            note("(Ctrl-C again, Ctrl-D or /exit to leave)")
            continue
        interrupted = False
        if line.strip() in ("/exit", "/quit"):
            break
        if not line.strip():
            continue
        try:
            _print(_turn(session, line, watch), watch)
        except Interrupted as exc:  # Ctrl-C while the reply was awaited: back to the prompt
            note(f"stopped waiting; {exc.message.removeprefix('interrupted: ')}")
    note(f"session: {session.session_id} (resume with --resume {session.session_id})")
