"""`backchannel key`: the person's own key, and a key per peer (create, list, rotate, revoke).

A peer's key is printed once, when it is made or rotated; only its hash is kept (in state.db)."""

from __future__ import annotations

from typing import Any

import click

from ..errors import UsageError
from ..home import config
from ..net.http import quote
from .connect import call
from .output import WIDE_HELP, emit, examples, note, table, when


@click.group("key")
def key() -> None:
    """The person's key, and keys for peers.

    \b
    The home's API_SERVER_KEY is the person's: it reaches everything. A peer gets a key of its own:
    a request made with it is from peer:NAME, and reaches only the Bot Chats of its profiles.
    """


@key.command(
    "show",
    epilog=examples("backchannel key show"),
)
def show() -> None:
    """Print this home's API_SERVER_KEY.

    On stdout; a warning goes to stderr."""
    root = config.home()
    config.require_home(root)
    value = config.read_env(root).get(config.API_KEY_VAR)
    if not value:
        raise UsageError(f"{str(config.env_path(root))!r} has no {config.API_KEY_VAR}: run `backchannel init`")
    note(
        "warning: this key is the person's: whoever holds it can do everything on this gateway. "
        "Give a peer a key of its own instead: `backchannel key create NAME`."
    )
    click.echo(value)


def _print_new(k: dict[str, Any], *, as_json: bool, verb: str) -> None:
    """A key and its value (`k`, as the gateway answered it: its record and `key`), shown this once."""
    reach = ", ".join(k["profiles"]) or "none"
    reads = ("may read" if k["read"] else "no reading") + ("; may scrape /metrics" if k["metrics"] else "")
    emit(k, as_json=as_json, text=lambda: click.echo(k["key"]))
    if not as_json:
        note(
            f"{verb} the key of peer {k['name']!r} (profiles: {reach}; {reads}). "
            "It is shown only this once: give it to that peer over a private channel."
        )


def _named(name: str) -> str:
    """The path of key NAME, once NAME is one (as the gateway would refuse it)."""
    return f"/v1/keys/{quote(config.check_name(name, what='key'))}"


@key.command(
    "create",
    epilog=examples(
        "backchannel key create spark",
        "backchannel key create spark --profile default --profile research",
        "backchannel key create laptop --profile '*' --read",
        "backchannel key create prometheus --metrics",
    ),
)
@click.argument("name")
@click.option(
    "--profile",
    "profiles",
    multiple=True,
    help="A profile the key reaches (repeatable; a glob such as '*' too). Default: default.",
)
@click.option("--read", is_flag=True, help="Also read sessions, messages, runs and the ledger of those profiles.")
@click.option(
    "--metrics", is_flag=True, help="May scrape GET /metrics (alone, without --profile: that and nothing else)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the key and its record as JSON.")
def create(name: str, profiles: tuple[str, ...], read: bool, metrics: bool, as_json: bool) -> None:
    """Make a key for peer NAME, printed once.

    A request made with it is from peer:NAME (peer:NAME/<its sender profile>), whatever its headers
    say; it reaches the Bot Chats of its profiles and the runs it sent, and nothing else unless --read.
    """
    made = call("POST", "/v1/keys", {"name": name, "profiles": list(profiles), "read": read, "metrics": metrics})
    _print_new(made, as_json=as_json, verb="made")


@key.command("list", epilog=examples("backchannel key list", "backchannel key list --json"))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.option("--wide", is_flag=True, help=WIDE_HELP)
def list_(as_json: bool, wide: bool) -> None:
    """The peers' keys.

    Name, profiles, read, created, last used: never the key."""
    found: list[dict[str, Any]] = call("GET", "/v1/keys")["data"]

    def text() -> None:
        if not found:
            note("no peer keys yet: `backchannel key create NAME` makes one")
            return
        table(
            [
                [k["name"], ",".join(k["profiles"]), "yes" if k["read"] else "no", when(k["created_at"]),
                 when(k["last_used_at"])]
                for k in found
            ],
            ["NAME", "PROFILES", "READ", "CREATED", "LAST USED"],
            fit=("PROFILES",),
            wide=wide,
        )

    emit(found, as_json=as_json, text=text)


@key.command("rotate", epilog=examples("backchannel key rotate spark"))
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the new key and its record as JSON.")
def rotate(name: str, as_json: bool) -> None:
    """Give peer NAME's key a new value.

    It is printed once; the old value stops working at once."""
    _print_new(call("POST", f"{_named(name)}/rotate"), as_json=as_json, verb="rotated")


@key.command("revoke", epilog=examples("backchannel key revoke spark"))
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the revoked key's record as JSON.")
def revoke(name: str, as_json: bool) -> None:
    """Remove peer NAME's key.

    Requests made with it are refused (401) from now on."""
    gone = call("DELETE", _named(name))
    emit(gone, as_json=as_json, text=lambda: click.echo(f"revoked the key of peer {gone['name']!r}"))
