"""Printing for the CLI: data to stdout (text or --json), diagnostics to stderr."""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Callable
from typing import Any

import click


def emit(data: Any, *, as_json: bool, text: Callable[[], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        text()


def note(message: str) -> None:
    click.echo(message, err=True)


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
        return sys.stdin.read()
    return message
