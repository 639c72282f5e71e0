"""`backchannel sessions list | show | import`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..home import config
from . import complete
from .connect import local_address, on_home
from .output import emit, examples, table, when

if TYPE_CHECKING:
    from ..core.gateway import Gateway
    from ..messages import Message
    from ..records import Session


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
def list_(profile_name: str | None, limit: int, as_json: bool) -> None:
    """Sessions, most recently active first."""

    async def read(gateway: Gateway) -> list[Session]:
        if profile_name:
            gateway.directory.check_profile(profile_name)
        return await gateway.directory.sessions(profile_name, limit=limit)

    rows = on_home(config.home(), read)

    def text() -> None:
        table(
            [[r.id, r.profile, r.title or "-", str(r.message_count), when(r.updated_at)] for r in rows],
            ["ID", "PROFILE", "TITLE", "MESSAGES", "LAST ACTIVE"],
        )

    emit([r.to_dict() for r in rows], as_json=as_json, text=text)


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

    async def read(gateway: Gateway) -> tuple[Session, list[Message]]:
        found = await gateway.directory.existing(local_address(session))
        return found, await gateway.directory.messages(found.id)

    row, messages = on_home(config.home(), read)

    def text() -> None:
        click.echo(f"session {row.id}  profile {row.profile}  title {row.title or '-'}  source {row.source}")
        for m in messages:
            if m.role == "assistant" and m.tool_calls:
                for call in m.tool_calls:
                    click.echo(f"[{when(m.created_at)}] assistant → {call.name}({call.arguments})")
                if not m.content:
                    continue
            label = f"tool {m.name}" if m.role == "tool" else m.role
            click.echo(f"[{when(m.created_at)}] {label}: {m.content}")

    emit({"session": row.to_dict(), "messages": [m.to_dict() for m in messages]}, as_json=as_json, text=text)


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
    found = on_home(config.home(), lambda gateway: gateway.imports.sessions(profile_name))

    def text() -> None:
        table(
            [[i.session.id, i.session.title or "-", "new" if i.created else "known"] for i in found],
            ["ID", "TITLE", "HERE"],
        )
        click.echo(f"{sum(i.created for i in found)} new, {len(found)} sessions of profile {profile_name}")

    emit(
        [{**i.session.to_dict(), "hermes_id": i.session.remote_id, "created": i.created} for i in found],
        as_json=as_json,
        text=text,
    )
