"""Doctor's check of each Hermes home connected to a profile (`hermes connect`): its .env still holds that profile's
agent key in force, names that profile, and its config.yaml enables the plugin. Files only: no network."""

from __future__ import annotations

import asyncio
from pathlib import Path

from .. import shell
from ..errors import BackchannelError
from ..home import config, hermes
from ..home.config import GatewayConfig
from ..store import backend, peer_keys
from .report import Check, fail, ok, warn

TIMEOUT_SECONDS = 10.0


async def connected(root: Path, settings: GatewayConfig) -> list[Check]:
    """One check per agent key made for a Hermes home; none when there is none (or the store cannot be read:
    its own check says why)."""
    try:
        db = backend.open_store(root, settings)
        async with asyncio.timeout(TIMEOUT_SECONDS):
            await db.open()
            try:
                keys = await peer_keys.by_hash(db)
            finally:
                await db.aclose()
    except (BackchannelError, TimeoutError):
        return []
    return [_home(digest, key) for digest, key in sorted(keys.items(), key=lambda kv: kv[1].name) if key.hermes_home]


def _home(digest: str, key: peer_keys.PeerKey) -> Check:
    assert key.hermes_home is not None and key.acts_as is not None
    check, home, profile = f"hermes {key.acts_as}", Path(key.hermes_home), key.acts_as
    again = f"{shell.command('backchannel', 'hermes', 'connect', profile, '--hermes-home', str(home))}, then restart"
    again += " that Hermes gateway"
    if not home.is_dir():
        return warn(check, f"the Hermes home {str(home)!r} of key {key.name!r} is not here", again)
    try:
        values = hermes.env(home)
        enabled = hermes.plugin_enabled(home)
        searching = hermes.tool_search_on(home)
    except BackchannelError as exc:
        return fail(check, exc.message, f"correct that file, then {again}")
    env, cfg = str(config.env_path(home)), str(hermes.config_path(home))
    held = values.get(hermes.KEY_VAR)
    if not held or peer_keys.digest(held) != digest:
        return fail(check, f"{env!r} does not hold key {key.name!r} as it is now (rotated, or replaced)", again)
    if values.get(hermes.PROFILE_VAR) != profile:
        return fail(check, f"{env!r} names profile {values.get(hermes.PROFILE_VAR)!r}, not {profile!r}", again)
    if not enabled:
        return fail(check, f"{cfg!r} does not enable the plugin (plugins.enabled)", again)
    if searching:
        return warn(
            check,
            f"{cfg!r} leaves Hermes's tool search on: from Hermes 0.22 a model reaches send_to_session only"
            " through tool_call, and one calling it by name is told it does not exist",
            "set tools.tool_search.enabled: off there (or run hermes connect again without --keep-tool-search)",
        )
    return ok(check, f"{str(home)!r}: its .env holds key {key.name!r} in force; the plugin is enabled")
