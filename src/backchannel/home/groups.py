"""The home's groups changed from the CLI (`backchannel group`): its config.yaml's `groups:` edited in place.

Edited as `yamledit` edits (comments, key order and quoting kept), checked by the loader the gateway uses, and
replaced atomically: a refused change leaves the file as it was. What a member names is checked by the caller
(`cli/group_cmd.py`); here a group is a name and a list of member words.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import NotFound, UsageError
from . import config, yamledit


def groups(root: Path) -> dict[str, list[str]]:
    """Every group of the home, by name, its members as written."""
    return dict(config.load_gateway_config(root).groups)


def members(root: Path, name: str) -> list[str]:
    found = groups(root)
    if name not in found:
        raise NotFound(f"no group {name!r} (groups: {', '.join(sorted(found)) or 'none'})", code="group_not_found")
    return found[name]


def edit(
    root: Path,
    name: str,
    *,
    create: bool = False,
    add: Iterable[str] = (),
    remove: Iterable[str] = (),
    drop: bool = False,
) -> list[str]:
    """Make group `name` (`create`: refused when it exists), add members to it, remove members from it, or `drop` it
    whole; its members afterwards (none once dropped)."""
    config.check_name(name, what="group")
    adding, removing = list(dict.fromkeys(add)), list(dict.fromkeys(remove))
    path = config.config_path(root)

    def change(data: dict[str, Any]) -> list[str]:
        if data.get("groups") is None:
            data["groups"] = {}
        section = data["groups"]
        if create and name in section:
            raise UsageError(f"group {name!r} exists already: `backchannel group add {name} MEMBER` adds to it")
        if not create and name not in section:
            known = ", ".join(sorted(section)) or "none"
            raise NotFound(f"no group {name!r} (groups: {known}); make it with `backchannel group create`")
        if drop:
            del section[name]
            return []
        if create:
            section[name] = []
        current = section[name]
        had = [str(m) for m in current]
        missing = [m for m in removing if m not in had]
        if missing:
            raise UsageError(f"group {name!r} has no member {missing[0]!r} (it has: {', '.join(had) or 'none'})")
        for member in removing:
            current.remove(member)
        for member in adding:
            if member not in had:
                current.append(member)
        return [str(m) for m in current]

    return yamledit.edit(path, change, check=lambda data: config.parse_gateway_config(data, path))
