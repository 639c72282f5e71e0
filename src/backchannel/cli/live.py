"""A person's message answered live: the reply shown as the engine produces it and, while its run waits in
the session's queue, behind how many runs (the gateway's message stream, running or in this process, shown
through a `Watch`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..addresses import LocalAddress
from ..errors import UsageError
from .connect import Sent, deliver
from .link import Where
from .output import note

STREAM_HELP = "Print the reply as it is produced (default: when stdout is a terminal)."


def streams(option: bool | None, *, as_json: bool) -> bool:
    """Whether to show the reply live: --stream/--no-stream, else when stdout is a terminal; never with --json."""
    if as_json:
        if option:
            raise UsageError("give --stream (text as it comes) or --json (one object at the end), not both")
        return False
    return sys.stdout.isatty() if option is None else option


class Watch:
    """What a live delivery shows as it goes (a `link.Progress`): the reply's text on stdout, waits in the queue
    on stderr."""

    def __init__(self) -> None:
        self.shown = False  # some of this message's reply is on stdout already
        self._open = False  # ... and its line is not ended yet
        self._ahead: int | None = None

    def begin(self) -> None:
        self.shown = self._open = False
        self._ahead = None

    def delta(self, text: str) -> None:
        if text:
            click.echo(text, nl=False)
            sys.stdout.flush()
            self.shown = self._open = True

    def waiting(self, ahead: int, where: str) -> None:
        if ahead == self._ahead or (ahead == 0 and self._ahead is None):
            return  # every run is queued for a moment: only a real wait is worth a line
        runs = "run" if ahead == 1 else "runs"
        note(f"queued behind {ahead} {runs} in {where}" if ahead else f"next in {where}")
        self._ahead = ahead

    def end_line(self) -> None:
        """End the streamed reply's line (before a receipt, an error or the next prompt)."""
        if self._open:
            click.echo("")
            self._open = False


async def deliver_live(
    root: Path,
    to: Where | LocalAddress,
    message: str,
    *,
    wait: float | None,
    key: str,
    watch: Watch,
    steer: bool = False,
) -> Sent:
    """Deliver as the person, showing the run as it goes; wait up to `wait` seconds (None: until it ends)."""
    watch.begin()
    return await deliver(root, to, message, wait=wait, key=key, steer=steer, progress=watch)
