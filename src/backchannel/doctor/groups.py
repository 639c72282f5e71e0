"""Doctor's check of the home's groups: each one expands (no group contains itself), and every member names
something this home knows (a profile, a peer, a group); a member that names nothing is that member's failure in a
group send, so it is a warning here."""

from __future__ import annotations

from pathlib import Path

from .. import addresses, shell
from ..core.delivery.groups import Groups
from ..errors import BackchannelError
from ..home import config, peers
from ..home.profiles import list_profiles
from .report import Check, fail, ok, warn


def groups(root: Path) -> list[Check]:
    settings = config.load_gateway_config(root)
    if not settings.groups:
        return []
    known_profiles = set(list_profiles(root))
    known_peers = {p.name for p in peers.all_peers(root)}
    found: list[Check] = []
    for name in sorted(settings.groups):
        check = f"group {name}"
        try:
            members = Groups(root).members(name)
        except BackchannelError as exc:
            found.append(fail(check, exc.message, f"edit groups.{name} in config.yaml, or `backchannel group remove`"))
            continue
        problems = {m.text: m.problem for m in members if m.problem}
        for m in members:
            if m.address is None:
                continue
            local, remote = addresses.as_local(m.address), addresses.as_remote(m.address)
            if local is not None and local.profile and local.profile not in known_profiles:
                problems[m.text] = f"no profile {local.profile!r}"
            elif remote is not None and remote.peer not in known_peers:
                problems[m.text] = f"no peer {remote.peer!r}"
        if problems:
            gone = "; ".join(f"{member}: {problem}" for member, problem in problems.items())
            fix = f"`{shell.command('backchannel', 'group', 'remove', name, *problems)}` for what is gone"
            found.append(warn(check, gone, fix))
        else:
            found.append(ok(check, f"{len(members)} members: {', '.join(m.text for m in members)}"))
    return found
