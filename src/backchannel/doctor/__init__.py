"""`backchannel doctor`: check a home (files, configs, engines' endpoints, MCP servers, its gateway, its peers).

Every check becomes a line of the report, ok, a warning or a failure; none raises. The checks that
talk to a network run at once, each with a short timeout, so one hung endpoint does not stall the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path

from ..errors import BackchannelError
from ..home import peers
from ..home.profiles import Profile
from ..home.runtime import listening
from ..store.backend import is_shared
from . import configs, disk, endpoints, gateways, groups, hermes, mcp, rules, shared
from .report import Check, Report, Status, fail

__all__ = ["Check", "Report", "Status", "examine"]


async def examine(root: Path, *, deep: bool = False) -> Report:
    """Check the home at `root` (`deep`: SQLite's full integrity_check of state.db); changes nothing in it
    (opening state.db applies its pending migrations only)."""
    found = disk.home(root)
    if found.status is Status.FAIL:
        return Report((found,))
    checks = [found]
    home_config, settings = configs.home_config(root)
    checks += home_config
    env, key = disk.env_file(root)
    checks.append(env)
    remote: list[Awaitable[list[Check]]] = []
    try:
        shared_store = settings is not None and is_shared(settings)
    except BackchannelError as exc:  # BACKCHANNEL_STORE_URL that is no store's
        checks.append(fail("store", exc.message))
        shared_store = True
    if not shared_store:
        checks.append(disk.store(root, deep=deep))
    elif settings is not None:
        remote.append(_one(shared.store(root, settings)))
    folder, names = disk.profiles_folder(root)
    checks.append(folder)
    checks += configs.stray_folders(root)
    if settings is not None:
        checks += groups.groups(root)
    loaded: dict[str, Profile] = {}
    for name in names:
        profile_checks, profile = configs.profile_config(root, name)
        checks += profile_checks
        if profile is not None:
            loaded[name] = profile
        if profile is not None and profile.config.model.engine == "openai":
            remote.append(endpoints.endpoint(root, profile))
        if profile is not None and profile.config.model.engine == "hermes":
            remote.append(endpoints.hermes_endpoint(root, profile))
        if profile is not None and profile.config.mcp_servers:
            remote.append(mcp.servers(root, profile))
    checks += rules.crossed(loaded)
    if settings is not None:
        remote.append(_one(gateways.own(listening(root), settings, key)))
        try:
            known = peers.all_peers(root)
        except BackchannelError as exc:  # .env does not parse: its own check says so
            checks.append(fail("peers", f"cannot read the peers' keys: {exc.message}"))
            known = []
        remote += [_one(gateways.peer(p)) for p in known]
        remote.append(hermes.connected(root, settings))
    for found_checks in await asyncio.gather(*remote):
        checks += found_checks
    return Report(tuple(checks))


async def _one(check: Awaitable[Check]) -> list[Check]:
    return [await check]
