"""A Hermes home as `hermes connect` leaves it: Backchannel's URL, key and profile in its .env, the plugin enabled in
its config.yaml (by adding to it: its comments and every other key kept), and its API server's address and key.

Nothing here asks a network: Hermes 0.22's `hermes plugins enable` fetches a Python first, so the plugin is enabled
as that command records it, in config.yaml: `plugins.enabled` gets `backchannel` (both 0.19 and 0.22 load an
entry-point plugin named there), and the question it asks a person for every plugin not bundled with Hermes,
"Allow this plugin to replace built-in tools? Grant it?", is answered no
(`plugins.entries.backchannel.allow_tool_override: false`, what a no writes): the plugin replaces no built-in tool.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, UsageError
from . import config, yamledit

PLUGIN = "backchannel"
URL_VAR, KEY_VAR, PROFILE_VAR = "BACKCHANNEL_URL", "BACKCHANNEL_API_KEY", "BACKCHANNEL_PROFILE"
MARKERS = ("config.yaml", ".env", "state.db", "SOUL.md")  # what a Hermes home has once Hermes has used it
API_PORT = 8642  # Hermes's own default for its API server


def config_path(home: Path) -> Path:
    return home / "config.yaml"


def check(home: Path) -> Path:
    """The Hermes home at `home`; a usage error saying why when there is none (nothing is made there)."""
    if not home.exists():
        raise UsageError(
            f"no Hermes home at {str(home)!r}: there is no such folder (run Hermes once with HERMES_HOME set to it, "
            "or give the folder Hermes uses)",
            code="no_hermes_home",
        )
    if not home.is_dir():
        raise UsageError(f"{str(home)!r} is a file, not a Hermes home folder", code="no_hermes_home")
    if not any((home / name).exists() for name in MARKERS):
        raise UsageError(
            f"{str(home)!r} does not look like a Hermes home: it has none of {', '.join(MARKERS)} "
            "(run Hermes once there first)",
            code="no_hermes_home",
        )
    return home


def env(home: Path) -> dict[str, str]:
    """The Hermes home's .env (an error naming the line that does not parse)."""
    return config.read_env(home)


def set_env(home: Path, values: dict[str, str]) -> None:
    """Set variables in the Hermes home's .env, keeping its other lines; mode 0600."""
    config.set_env_values(home, dict(values))


def _plugins(data: dict[str, Any], path: Path) -> dict[str, Any]:
    plugins = data.get("plugins")
    if plugins is None:
        data["plugins"] = plugins = {}
    if not isinstance(plugins, dict):
        raise ConfigError(f"{str(path)!r}: plugins is a {type(plugins).__name__}, not a mapping")
    return plugins


def _list(section: dict[str, Any], name: str, path: Path) -> list[Any]:
    found = section.get(name)
    if found is None:
        section[name] = found = []
    if not isinstance(found, list):
        raise ConfigError(f"{str(path)!r}: plugins.{name} is a {type(found).__name__}, not a list")
    return found


def enable_plugin(home: Path, *, tool_search: bool = False) -> list[str]:
    """Enable the plugin in the Hermes home's config.yaml; what was added (empty: it was enabled already).

    Hermes from 0.22 puts every plugin's tools behind its tool search (`tool_search`, `tool_call`), where a model
    that calls `send_to_session` by name is told it does not exist, and Hermes offers a plugin no way to keep its
    tools at hand: so, unless `tool_search`, the search is turned off there (`tools.tool_search.enabled: off`;
    Hermes 0.19 has no such search and ignores the key)."""
    path = config_path(home)

    def change(data: dict[str, Any]) -> list[str]:
        done: list[str] = []
        if not tool_search and _search(data, path).get("enabled") not in (False, "off"):
            _search(data, path)["enabled"] = "off"
            done.append("tools.tool_search.enabled: off")
        plugins = _plugins(data, path)
        enabled = _list(plugins, "enabled", path)
        if PLUGIN not in enabled:
            enabled.append(PLUGIN)
            done.append(f"plugins.enabled: {PLUGIN}")
        disabled = plugins.get("disabled")
        if isinstance(disabled, list) and PLUGIN in disabled:  # it would win over enabled
            disabled.remove(PLUGIN)
            done.append(f"plugins.disabled: {PLUGIN} removed")
        entries = plugins.get("entries")
        if entries is None:
            plugins["entries"] = entries = {}
        if isinstance(entries, dict):
            entry = entries.get(PLUGIN)
            if entry is None:
                entries[PLUGIN] = entry = {}
            if isinstance(entry, dict) and "allow_tool_override" not in entry:
                entry["allow_tool_override"] = False
                done.append(f"plugins.entries.{PLUGIN}.allow_tool_override: false")
        # A platform whose tools are a list saved in config.yaml gets only those: add the plugin's toolset, as
        # `hermes plugins enable` does (a platform with no list has every enabled plugin's tools already).
        toolsets = data.get("platform_toolsets")
        if isinstance(toolsets, dict):
            for platform, names in toolsets.items():
                if isinstance(names, list) and PLUGIN not in names:
                    names.append(PLUGIN)
                    done.append(f"platform_toolsets.{platform}: {PLUGIN}")
        return done

    return yamledit.edit(path, change, check=lambda data: None)


def _search(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """The config's `tools.tool_search` mapping, made when missing."""
    section = data
    for name in ("tools", "tool_search"):
        found = section.get(name)
        if found is None:
            section[name] = found = {}
        if not isinstance(found, dict):
            raise ConfigError(f"{str(path)!r}: {name} is a {type(found).__name__}, not a mapping")
        section = found
    return section


def tool_search_on(home: Path) -> bool:
    """Whether the Hermes home's config.yaml leaves Hermes's tool search on (the plugin's tools then reached only
    through `tool_call`, on a Hermes that has the search)."""
    tools = config.load_yaml(config_path(home)).get("tools")
    search = tools.get("tool_search") if isinstance(tools, dict) else None
    enabled = search.get("enabled") if isinstance(search, dict) else None
    return enabled not in (False, "off")


def plugin_enabled(home: Path) -> bool:
    """Whether the Hermes home's config.yaml enables the plugin (and does not disable it)."""
    data = config.load_yaml(config_path(home))
    plugins = data.get("plugins")
    if not isinstance(plugins, dict):
        return False
    enabled, disabled = plugins.get("enabled"), plugins.get("disabled")
    return isinstance(enabled, list) and PLUGIN in enabled and not (isinstance(disabled, list) and PLUGIN in disabled)


@dataclass(frozen=True)
class ApiServer:
    """Where the Hermes home's API server listens and its key; `added`: what .env variables connect sets for it."""

    url: str
    key: str
    added: dict[str, str]


def api_server(home: Path, values: dict[str, str]) -> ApiServer:
    """The Hermes home's API server (from config.yaml `platforms.api_server.extra`, else its .env `API_SERVER_*`,
    as Hermes reads them). Without a key there, one is made (with API_SERVER_ENABLED=true and, without a port, a
    free one from 8642 up): `added` holds them, for the caller to write into that .env."""
    data = config.load_yaml(config_path(home))
    platforms = data.get("platforms")
    server = platforms.get("api_server") if isinstance(platforms, dict) else None
    extra = server.get("extra") if isinstance(server, dict) else None
    extra = extra if isinstance(extra, dict) else {}
    added: dict[str, str] = {}
    key = str(extra.get("key") or values.get("API_SERVER_KEY") or "")
    port = str(extra.get("port") or values.get("API_SERVER_PORT") or "")
    host = str(extra.get("host") or values.get("API_SERVER_HOST") or "127.0.0.1")
    if not key:
        key = added["API_SERVER_KEY"] = config.new_api_key()
    if not values.get("API_SERVER_ENABLED") and not (isinstance(server, dict) and server.get("enabled")):
        added["API_SERVER_ENABLED"] = "true"
    if not port:
        port = added["API_SERVER_PORT"] = str(_free_port(API_PORT))
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return ApiServer(f"http://{f'[{host}]' if ':' in host else host}:{port}", key, added)


def _free_port(first: int) -> int:
    """The first loopback port from `first` up that nothing listens on now."""
    for port in range(first, first + 100):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise UsageError(f"no free port from {first} to {first + 99} for the Hermes API server: set API_SERVER_PORT")
