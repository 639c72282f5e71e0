"""`backchannel sessions list | show | import`."""

from __future__ import annotations

import asyncio
from typing import Any

import click

from ..home import config
from ..net.http import quote, with_query
from . import complete
from .connect import call, gateway_link
from .output import WIDE_HELP, emit, examples, table, when


@click.group("sessions")
def sessions() -> None:
    """List sessions and read their messages."""


@sessions.command(
    "list", epilog=examples("backchannel sessions list -p research", "backchannel sessions list --limit 5 --json")
)
@click.option(
    "-p", "--profile", "profile_name", shell_complete=complete.profile_names, help="Only this profile's sessions."
)
@click.option(
    "--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="At most this many, newest first."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout (an error too, as one object).")
@click.option("--wide", is_flag=True, help=WIDE_HELP)
def list_(profile_name: str | None, limit: int, as_json: bool, wide: bool) -> None:
    """Sessions, most recently active first."""
    prefix = f"/p/{quote(profile_name)}" if profile_name else ""
    rows = call("GET", with_query(f"{prefix}/v1/sessions", limit=limit))["data"]

    def text() -> None:
        table(
            [[r["id"], r["profile"], r["title"] or "-", str(r["message_count"]), when(r["last_active"])] for r in rows],
            ["ID", "PROFILE", "TITLE", "MESSAGES", "LAST ACTIVE"],
            fit=("TITLE", "PROFILE"),
            wide=wide,
        )

    emit(rows, as_json=as_json, text=text)


@sessions.command(
    "show",
    epilog=examples(
        "backchannel sessions show 20261130_015530_55cf9b",
        "backchannel sessions show research/20261130_015530_55cf9b",
        "backchannel sessions show research --json",
    ),
)
@click.argument("session", metavar="SESSION", shell_complete=complete.sessions)
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout (an error too, as one object).")
def show(session: str, as_json: bool) -> None:
    """One session and all its messages, in order.

    SESSION is any local address: a session id, profile/session-id (as `send` prints it), or a profile alone
    (its Bot Chat)."""
    root = config.home()

    async def read() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        async with gateway_link(root, works=False) as link:
            found = (await link.client.request("GET", with_query("/v1/sessions", address=session))).body["data"][0]
            path = f"/p/{quote(found['profile'])}/api/sessions/{quote(found['id'])}/messages"
            return found, (await link.client.request("GET", path)).body["data"]

    row, messages = asyncio.run(read())

    def text() -> None:
        click.echo(
            f"session {row['id']}  profile {row['profile']}  title {row['title'] or '-'}  source {row['source']}"
        )
        for m in messages:
            said = when(m.get("created_at"))
            if m["role"] == "assistant" and m.get("tool_calls"):
                for call in m["tool_calls"]:
                    click.echo(f"[{said}] assistant → {call['name']}({call['arguments']})")
                if not m["content"]:
                    continue
            label = f"tool {m.get('name')}" if m["role"] == "tool" else m["role"]
            click.echo(f"[{said}] {label}: {m['content']}")

    emit({"session": row, "messages": messages}, as_json=as_json, text=text)


@sessions.command(
    "import",
    epilog=examples("backchannel sessions import -p research", "backchannel sessions import -p research --json"),
)
@click.option("-p", "--profile", "profile_name", required=True, help="A profile with the hermes engine.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout (an error too, as one object).")
def import_(profile_name: str, as_json: bool) -> None:
    """Make a Hermes gateway's sessions addressable here.

    For a profile with the hermes engine: each session of its Hermes gateway is known here under its
    Hermes id. Hermes's Bot Chat becomes the profile's Bot Chat; sessions already known are left as they are."""
    found = call("POST", f"/p/{quote(profile_name)}/v1/sessions/import")["data"]

    def text() -> None:
        table(
            [[i["id"], i["title"] or "-", "new" if i["created"] else "known"] for i in found],
            ["ID", "TITLE", "HERE"],
        )
        click.echo(f"{sum(bool(i['created']) for i in found)} new, {len(found)} sessions of profile {profile_name}")

    emit(found, as_json=as_json, text=text)
