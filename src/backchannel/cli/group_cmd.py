"""`backchannel group create | add | remove | list | show`: addresses sent to together (`group:NAME`)."""

from __future__ import annotations

import click

from .. import addresses
from ..errors import UsageError
from ..home import config, groups, peers
from ..home.profiles import list_profiles
from .output import WIDE_HELP, emit, examples, note, table


@click.group("group")
def group() -> None:
    """Groups: addresses sent to together.

    \\b
    `backchannel send group:NAME MESSAGE` (and an agent's send_to_session to group:NAME, or @group:NAME in a
    message) reaches every member, each as if sent alone: its own rules, run and outcome.
    """


def _checked(given: tuple[str, ...]) -> list[str]:
    """Each member as an address this home knows (a profile, a peer, another group) or a session id."""
    root = config.home()
    known_profiles = set(list_profiles(root))
    known_peers = {p.name for p in peers.all_peers(root)}
    known_groups = set(groups.groups(root))
    checked: list[str] = []
    for text in given:
        target = addresses.parse_target(text)
        local, remote, inner = addresses.as_local(target), addresses.as_remote(target), addresses.as_group(target)
        if local is not None and local.profile is not None and local.session_id is None:
            if local.profile not in known_profiles:
                raise UsageError(f"no profile {local.profile!r} (profiles: {', '.join(sorted(known_profiles))})")
        elif remote is not None:
            if remote.peer not in known_peers:
                raise UsageError(f"no peer {remote.peer!r} (peers: {', '.join(sorted(known_peers)) or 'none'})")
            if remote.session_id is not None:
                raise UsageError(f"{text!r}: a group reaches a peer's agent (peer:NAME or peer:NAME/AGENT)")
        elif inner is not None and inner.name not in known_groups:
            raise UsageError(f"no group {inner.name!r} (groups: {', '.join(sorted(known_groups)) or 'none'})")
        checked.append(str(target))
    return checked


@group.command("create", epilog=examples("backchannel group create team research builds peer:spark/ops"))
@click.argument("name")
@click.argument("members", nargs=-1)
def create(name: str, members: tuple[str, ...]) -> None:
    """Make group NAME of MEMBERS.

    Each member is a profile (its Bot Chat), profile/session-id, a session id, peer:NAME[/AGENT] or group:NAME."""
    made = groups.edit(config.home(), name, create=True, add=_checked(members))
    click.echo(f"group {name}: {', '.join(made) or 'no members yet'}")


@group.command("add", epilog=examples("backchannel group add team assistant"))
@click.argument("name")
@click.argument("members", nargs=-1, required=True)
def add(name: str, members: tuple[str, ...]) -> None:
    """Add MEMBERS to group NAME."""
    now = groups.edit(config.home(), name, add=_checked(members))
    click.echo(f"group {name}: {', '.join(now)}")


@group.command("remove", epilog=examples("backchannel group remove team builds", "backchannel group remove team"))
@click.argument("name")
@click.argument("members", nargs=-1)
def remove(name: str, members: tuple[str, ...]) -> None:
    """Remove MEMBERS from group NAME; without MEMBERS, the group itself."""
    now = groups.edit(config.home(), name, remove=members, drop=not members)
    click.echo(f"group {name}: {', '.join(now)}" if members else f"removed group {name}")


@group.command("list", epilog=examples("backchannel group list --json"))
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout (an error too, as one object).")
@click.option("--wide", is_flag=True, help=WIDE_HELP)
def list_(as_json: bool, wide: bool) -> None:
    """The groups and their members."""
    found = groups.groups(config.home())

    def text() -> None:
        if not found:
            note("no groups yet: `backchannel group create NAME MEMBER...` makes one")
            return
        rows = [[name, ", ".join(m)] for name, m in sorted(found.items())]
        table(rows, ["GROUP", "MEMBERS"], fit=("MEMBERS",), wide=wide)

    emit([{"name": n, "members": m} for n, m in sorted(found.items())], as_json=as_json, text=text)


@group.command("show", epilog=examples("backchannel group show team"))
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout (an error too, as one object).")
def show(name: str, as_json: bool) -> None:
    """One group: its members, and whom a message to it reaches.

    The members as written, then each address a message to group:NAME goes to (groups in it expanded once)."""
    root = config.home()
    written = groups.members(root, name)
    from ..core.delivery.groups import Groups  # the expansion the sends use

    reached = Groups(root).members(name)
    data = {
        "name": name,
        "members": written,
        "reaches": [{"member": m.text, **({"problem": m.problem} if m.problem else {})} for m in reached],
    }

    def text() -> None:
        click.echo(f"group {name}: {', '.join(written) or 'no members'}")
        for m in reached:
            click.echo(f"  {m.text}" + (f"  ({m.problem})" if m.problem else ""))

    emit(data, as_json=as_json, text=text)
