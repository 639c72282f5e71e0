"""`--deadline WHEN`, one option of every command that sends a message (`send`, `peer dm`, `peer run`): its help
and its reading (`backchannel.deadlines.parse`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from .. import deadlines

DEADLINE_HELP = (
    "Nobody waits for an answer after this: a duration or a time (10m, 1h30m, 14:32, 2026-11-30T14:32:00Z)."
    " Not started by then, the message expires (deadline_passed); a turn still running then is stopped, keeping"
    " what it had; the agents it messages in turn share the same clock."
)
Decorator = TypeVar("Decorator", bound=Callable[..., Any])


def deadline_option(also: str = "") -> Callable[[Decorator], Decorator]:
    """`--deadline WHEN` of a command that sends a message (`also`: what it means there besides), read by
    `deadline_of`."""
    return click.option(
        "--deadline", "deadline_text", metavar="WHEN", help=f"{DEADLINE_HELP}{also} E.g. --deadline 10m."
    )


def deadline_of(text: str | None) -> float | None:
    """`--deadline` as an absolute time (`deadlines.parse`); None when not given."""
    return deadlines.parse(text, now=time.time()) if text is not None else None
