"""`backchannel key show`: the person's own API key, for setting up a peer by hand."""

from __future__ import annotations

import click

from ..errors import UsageError
from ..home import config
from .output import examples, note


@click.group("key")
def key() -> None:
    """The API key of this home."""


@key.command(
    "show",
    epilog=examples(
        "backchannel key show", "backchannel key show | ssh spark backchannel peer add home --url http://home.lan:8377"
    ),
)
def show() -> None:
    """Print this home's API_SERVER_KEY on stdout (a warning goes to stderr)."""
    root = config.home()
    config.require_home(root)
    value = config.read_env(root).get(config.API_KEY_VAR)
    if not value:
        raise UsageError(f"{str(config.env_path(root))!r} has no {config.API_KEY_VAR}: run `backchannel init`")
    note(
        "warning: this key is the person's: whoever holds it can do everything on this gateway. "
        "Give it only to a peer you trust as yourself, over a private channel."
    )
    click.echo(value)
