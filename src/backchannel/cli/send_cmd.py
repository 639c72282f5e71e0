"""`backchannel send`: message any address as the person."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from .. import addresses, deadlines, keys
from ..addresses import Target
from ..errors import UsageError
from ..home import config
from ..outcome import GroupResult, Outcome, Result
from . import complete
from .connect import Sent, deliver, gateway_link, interruptible
from .deadline_option import deadline_of, deadline_option
from .live import STREAM_HELP, Watch, streams
from .output import emit, examples, message_words, note, read_message, shell_command

DEFAULT_WAIT = 120.0


@click.command(
    "send",
    epilog=examples(
        "backchannel send builds 'is the build green?'",
        "backchannel send research/20261130_015530_55cf9b - < notes.md",
        "backchannel send peer:spark/research 'status?' --wait 30 --json",
        "backchannel send group:team 'stand-up: what are you on?'",
        "backchannel send builds 'also run the linter' --steer",
        "backchannel send research 'is the release blocked?' --deadline 10m",
    ),
)
@click.argument("address", shell_complete=complete.addresses)
@click.argument("message", required=False)
@click.option(
    "--wait",
    "wait",
    type=click.FloatRange(0, 86_400),
    default=DEFAULT_WAIT,
    show_default=True,
    help="Seconds to wait for the reply before printing a receipt.",
)
@click.option("--idempotency-key", "key", help="Send twice with the same key and it is handled once.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout (an error too, as one object).")
@click.option("--stream/--no-stream", "stream", default=None, help=STREAM_HELP)
@click.option(
    "--steer",
    is_flag=True,
    help="Into the session's running turn, at its next model step (echo, openai), instead of after it.",
)
@deadline_option()
def send(
    address: str,
    message: str | None,
    wait: float,
    key: str | None,
    as_json: bool,
    stream: bool | None,
    steer: bool,
    deadline_text: str | None,
) -> None:
    """Message ADDRESS as the person; print the reply, or a receipt.

    MESSAGE is the argument, or stdin ('-', or none with stdin not a terminal), read as UTF-8 (a byte order
    mark is dropped).
    ADDRESS is a profile (its Bot Chat), profile/session-id, a session id, peer:NAME[/AGENT] on another
    gateway, or group:NAME (every member, each as if sent alone: one outcome each, and the highest exit code).
    @session:, @peer: and @group: mentions in the message are answered by their targets first.
    With --steer, a session running a turn gets the message in that turn (its reply is the turn's); the
    outcome says where it landed: started, steered or queued.
    With --deadline, the message carries when you stop waiting, and so does every message its agent sends for it:
    `send research 'is the release blocked?' --deadline 10m` gives research and everyone it asks 10 minutes.
    """
    parsed = addresses.parse_target(address)
    text = read_message(message)
    if not text or not text.strip():
        raise UsageError("no message: give it as an argument, or '-' to read stdin")
    keys.check_external(key)
    deadline = deadline_of(deadline_text)
    local = addresses.as_local(parsed)
    if steer and local is None:  # refused before any gateway is reached or built
        raise UsageError(f"--steer gives a message to a running turn of this home's sessions; {address!r} is none")
    live = streams(stream, as_json=as_json) and local is not None  # a session's run is streamed
    root = config.home()
    # Without --idempotency-key each invocation is a new message (a person who repeats means it);
    # retries within this invocation reuse one key, so they are handled once.
    key = key or keys.cli()
    text = text if local is not None else text.strip()
    again = ["send", address, *message_words(message, text)]
    if deadline is not None:  # asked again, the same clock: the deadline as the time it is, not a duration anew
        again += ["--deadline", deadlines.wire(deadline)]
    watch = Watch() if live else None
    with interruptible(root, shell_command(*again, "--idempotency-key", key), key=key):
        try:
            sent = asyncio.run(
                _send(root, parsed, text, wait=wait, key=key, steer=steer, watch=watch, deadline=deadline)
            )
        finally:
            if watch is not None:
                watch.end_line()
    if isinstance(sent, GroupResult):
        emit({**sent.to_dict(), "idempotency_key": key}, as_json=as_json, text=lambda: _print_group(sent))
        sys.exit(sent.exit_code)
    if isinstance(sent, Result):  # a peer's agent: shown as `peer dm` shows it
        from . import peer_cmd

        emit(peer_cmd.dm_dict(sent), as_json=as_json, text=lambda: peer_cmd.print_dm(sent))
        peer_cmd.retry_hint(sent, again)
        sys.exit(sent.outcome.exit_code)
    sent.check()
    emit(sent.to_dict(), as_json=as_json, text=lambda: _print(sent, watch))


async def _send(
    root: Path,
    to: Target,
    text: str,
    *,
    wait: float,
    key: str,
    steer: bool,
    watch: Watch | None,
    deadline: float | None = None,
) -> Sent | Result | GroupResult:
    """A session's message as `Sent` (shown live with `watch`); a peer's or a group's outcome as it came."""
    local = addresses.as_local(to)
    if local is not None:
        if watch is not None:
            watch.begin()
        return await deliver(root, local, text, wait=wait, key=key, steer=steer, progress=watch, deadline=deadline)
    async with gateway_link(root) as link:
        return await link.send(to, text, wait=wait, key=key, steer=steer, deadline=deadline)


def _print_group(sent: GroupResult) -> None:
    """A block per member (its outcome, then its reply or why there is none), and how many were reached."""
    for member in sent.members:
        result = member.result
        if result is None:
            click.echo(f"[{member.target}] skipped: {member.skipped}\n")
            continue
        click.echo(f"[{member.target}] {result.outcome.value}")
        if result.outcome is Outcome.DELIVERED:
            click.echo(result.reply or "(no reply)")
        elif result.outcome in (Outcome.RECEIPT, Outcome.HELD):
            click.echo(f"run {result.run_id} is {result.state}: accepted, do not resend")
        else:
            click.echo(f"{result.code or result.outcome.value}: {result.error or 'no detail'}")
        click.echo("")
    click.echo(f"reached {sent.reached}")


def _print(sent: Sent, watch: Watch | None) -> None:
    result = sent.result
    if result.outcome is Outcome.DELIVERED:
        if watch is None or not watch.shown:
            click.echo(result.reply or "(no reply)")
        return
    position = f", position {result.queue_position}" if result.queue_position else ""
    into = " (steered into the running turn)" if result.landed == "steered" else ""
    click.echo(f"receipt: run {result.run_id} is {result.state}{position}{into}: accepted, do not resend")
    note(f"follow it: backchannel runs follow {result.run_id}")
    if sent.via == "local":
        note("no gateway is running: the run is answered when one starts (backchannel gateway) or by the next command")
