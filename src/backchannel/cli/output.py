"""Printing for the CLI: data to stdout (text or --json), diagnostics to stderr."""

from __future__ import annotations

import datetime as dt
import json
import logging
import shlex
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

import click

from ..home import schema


def examples(*lines: str) -> str:
    """A command's EXAMPLES section for its --help, kept as written (click does not rewrap a \\b paragraph)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


def shell_command(*words: str) -> str:
    """A command as the person types it again, each word quoted for the shell: the one place printed commands
    are quoted."""
    return shlex.join(["backchannel", *words])


def message_words(given: str | None, text: str) -> list[str]:
    """The MESSAGE argument of a command to type again: the message itself, or '-' when it came on stdin."""
    return [text] if given not in (None, "-") else ["-"]


def emit(data: Any, *, as_json: bool, text: Callable[[], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        text()


def note(message: str) -> None:
    click.echo(message, err=True)


class _Warnings(logging.Handler):
    """The loading code's warnings (an unknown key in a config file) as `warning:` lines on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"warning: {record.getMessage()}", err=True)


def show_config_warnings(where: Literal["stderr", "log", "nowhere"] = "stderr") -> None:
    """Where the loading code's warnings go: stderr as lines of their own (a command), the log like the rest
    (the gateway), or nowhere (doctor, which reports each as a check of its own)."""
    logger = schema.log
    for handler in [h for h in logger.handlers if isinstance(h, _Warnings)]:
        logger.removeHandler(handler)
    if where == "stderr":
        logger.addHandler(_Warnings(logging.WARNING))
    logger.propagate = where == "log"
    logger.disabled = where == "nowhere"


def when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return dt.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S")


def table(rows: list[list[str]], headers: list[str]) -> None:
    if not rows:
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    click.echo("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for row in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def read_message(message: str | None) -> str | None:
    """The message argument; '-' (or none, with stdin not a terminal) reads stdin."""
    if message == "-" or (message is None and not sys.stdin.isatty()):
        return sys.stdin.read().rstrip("\r\n")  # the newline that ends the last line is not part of the message
    return message


async def show_progress(run_id: str, events: AsyncIterator[dict[str, Any]]) -> None:
    """A run's progress on stderr as its events arrive: one live line on a terminal, one line per event otherwise."""
    tty = sys.stderr.isatty()
    counts = {"chars": 0, "tools": 0}
    async for event in events:
        name = str(event.get("event"))
        counts["chars"] += len(str(event.get("delta") or ""))
        counts["tools"] += name == "tool.started"
        if tty:
            click.echo(
                f"\r\033[K{run_id}: {name} · {counts['tools']} tool calls · {counts['chars']} chars", nl=False, err=True
            )
        elif name != "message.delta":
            detail = event.get("tool") or event.get("error") or ""
            note(f"{name} {detail}".rstrip())
    if tty:
        click.echo("", err=True)
