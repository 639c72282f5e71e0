"""`backchannel store copy`: this home's store copied into another, empty one, and verified."""

from __future__ import annotations

import asyncio
import datetime as dt

import click

from ..home import config
from .output import emit, examples, note, table


@click.group("store")
def store() -> None:
    """Where this home keeps its runs, sessions and messages.

    \b
    By default its own state.db (SQLite); `store.url` in config.yaml names a PostgreSQL store that several
    gateways share (docs/shared-store.md).
    """


@store.command(
    "copy",
    epilog=examples(
        "backchannel store copy --to postgresql://backchannel@db.lan:5432/backchannel",
        "backchannel store copy --to ./state-from-postgres.db --json",
        "backchannel store copy --to ./backup.db --while-running",
    ),
)
@click.option(
    "--to",
    "to",
    required=True,
    metavar="URL|FILE",
    help="An empty PostgreSQL store (postgresql://user@host:5432/db; its password in the URL or in .env as "
    "BACKCHANNEL_STORE_PASSWORD), or the path of a new state.db file.",
)
@click.option(
    "--while-running",
    is_flag=True,
    help="Copy even while gateways (or commands) use the store: the copy is the store as it was at one moment, "
    "and what they write after it is not in it.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout (an error too, as one object).")
def copy(to: str, while_running: bool, as_json: bool) -> None:
    """Copy this home's store into an empty one, and verify it.

    Everything it holds goes into the empty store TO, every table value for value (ids kept), read from one
    snapshot of the store; then each table is counted and checksummed on both sides. Stop the home's gateway
    first (every gateway of a shared store): a copy is refused while anything else has the store open, unless
    --while-running, and then what is written after the snapshot is not in the copy (it says as of when it is,
    and how many runs came after). This home keeps using its store until you point it at the other (`store.url`
    in config.yaml)."""
    from ..core.store_copy import copy_store  # the core, loaded when a copy is asked for

    root = config.home()
    done = asyncio.run(copy_store(root, to, while_running=while_running))
    as_of = dt.datetime.fromtimestamp(done.as_of, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def text() -> None:
        table([[t.table, str(t.rows), t.checksum[:16]] for t in done.tables], ["TABLE", "ROWS", "CHECKSUM"])
        click.echo(
            f"copied {done.rows} rows from {done.source} into {done.target}, the store as it was at {as_of}"
            " (one snapshot): every table verified against it"
        )
        if to.startswith(("postgresql://", "postgres://")):
            note(f"to use it: store: {{url: {done.target}}} in config.yaml (its password in .env); start the gateway")

    emit(
        {
            "result": "copied",
            "source": done.source,
            "target": done.target,
            "as_of": as_of,
            "runs_after": done.runs_after,
            "rows": done.rows,
            "tables": [{"table": t.table, "rows": t.rows, "checksum": t.checksum} for t in done.tables],
        },
        as_json=as_json,
        text=text,
    )
    if done.runs_after:  # whatever the output: a copy thought whole would lose them
        note(
            f"warning: {done.runs_after} run{'s were' if done.runs_after > 1 else ' was'} accepted after {as_of}:"
            " they are not in the copy, nor is anything else written after that moment"
        )
