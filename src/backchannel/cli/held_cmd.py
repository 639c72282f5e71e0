"""`backchannel held | approve RUN | deny RUN`: messages a hold rule keeps for the person."""

from __future__ import annotations

import asyncio
import sys
import urllib.parse
from typing import Any

import click

from ..home import config
from . import complete
from .connect import request
from .output import WIDE_HELP, emit, examples, note, table, when


def _keep(body: dict[str, Any]) -> dict[str, Any]:
    names = ("run_id", "status", "sender", "profile", "session_id", "message", "hops", "created_at", "expires_at")
    return {**{n: body.get(n) for n in names}, "error": body.get("error")}


@click.command("held", epilog=examples("backchannel held", "backchannel held -p research --json"))
@click.option("-p", "--profile", "profile_name", shell_complete=complete.profile_names, help="Only this profile's.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.option("--wide", is_flag=True, help=WIDE_HELP)
def held(profile_name: str | None, as_json: bool, wide: bool) -> None:
    """Messages held for your approval.

    A session_messaging.hold rule keeps them; oldest first."""
    root = config.home()
    config.require_home(root)
    prefix = f"/p/{urllib.parse.quote(profile_name, safe='')}" if profile_name else ""
    body, _ = asyncio.run(request("GET", f"{prefix}/v1/held"))
    rows = [_keep(r) for r in body.get("data", [])]

    def text() -> None:
        if not rows:
            note("no messages are held")
            return
        table(
            [
                [r["run_id"], r["sender"], f"{r['profile']}/{r['session_id']}", when(r["expires_at"]), _first(r)]
                for r in rows
            ],
            ["RUN", "FROM", "TO", "EXPIRES", "MESSAGE"],
            fit=("MESSAGE", "FROM", "TO"),
            drop=("EXPIRES",),
            wide=wide,
        )
        note("approve with `backchannel approve RUN`, refuse with `backchannel deny RUN --why TEXT`")

    emit(rows, as_json=as_json, text=text)


def _first(row: dict[str, Any]) -> str:
    text = str(row.get("message") or "").strip().splitlines()
    return text[0][:60] if text else ""


@click.command("approve", epilog=examples("backchannel approve run_0123…"))
@click.argument("run_id", shell_complete=complete.run_ids)
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
def approve(run_id: str, as_json: bool) -> None:
    """Queue a held message.

    Its turn runs, and its sender gets the reply."""
    root = config.home()
    config.require_home(root)
    body, via = asyncio.run(request("POST", f"/v1/held/{urllib.parse.quote(run_id, safe='')}/approve"))
    row = _keep(body)
    emit(row, as_json=as_json, text=lambda: click.echo(f"{row['run_id']}: approved, {row['status']}"))
    if via == "local" and not as_json:
        note("no gateway is running: its turn runs when `backchannel gateway` starts")
    sys.exit(0)


@click.command("deny", epilog=examples("backchannel deny run_0123… --why 'not today'"))
@click.argument("run_id", shell_complete=complete.run_ids)
@click.option("--why", help="The reason its sender reads (at most 2,000 characters).")
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
def deny(run_id: str, why: str | None, as_json: bool) -> None:
    """Refuse a held message.

    It ends `denied`, and its sender is told (the outcome refused)."""
    root = config.home()
    config.require_home(root)
    path = f"/v1/held/{urllib.parse.quote(run_id, safe='')}/deny"
    body, _ = asyncio.run(request("POST", path, {"why": why} if why else {}))
    row = _keep(body)
    emit(row, as_json=as_json, text=lambda: click.echo(f"{row['run_id']}: denied ({row['error']})"))
