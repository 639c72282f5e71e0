"""`backchannel store copy`: this home's store copied into another, empty one, and verified."""

from __future__ import annotations

import asyncio

import click

from ..home import config
from .output import emit, examples, note, table


@click.group("store")
def store() -> None:
    """Where this home keeps its runs, sessions and messages.

    \b
    By default its own state.db (SQLite); `store.url` in config.yaml names a PostgreSQL store that several
    gateways share (README: More than one machine).
    """


@store.command(
    "copy",
    epilog=examples(
        "backchannel store copy --to postgresql://backchannel@db.lan:5432/backchannel",
        "backchannel store copy --to ./state-from-postgres.db --json",
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
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout (an error too, as one object).")
def copy(to: str, as_json: bool) -> None:
    """Copy this home's store into an empty one, and verify it.

    Everything it holds goes into the empty store TO, every table value for value (ids kept); then each table
    is counted and checksummed on both sides. Stop
    the home's gateway first (every gateway of a shared store). This home keeps using its store until you point
    it at the other (`store.url` in config.yaml)."""
    from ..core.store_copy import copy_store  # the core, loaded when a copy is asked for

    root = config.home()
    done = asyncio.run(copy_store(root, to))

    def text() -> None:
        table([[t.table, str(t.rows), t.checksum[:16]] for t in done.tables], ["TABLE", "ROWS", "CHECKSUM"])
        click.echo(f"copied {done.rows} rows from {done.source} into {done.target}: every table verified")
        if to.startswith(("postgresql://", "postgres://")):
            note(f"to use it: store: {{url: {done.target}}} in config.yaml (its password in .env); start the gateway")

    emit(
        {
            "result": "copied",
            "source": done.source,
            "target": done.target,
            "rows": done.rows,
            "tables": [{"table": t.table, "rows": t.rows, "checksum": t.checksum} for t in done.tables],
        },
        as_json=as_json,
        text=text,
    )
