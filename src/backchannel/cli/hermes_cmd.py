"""`backchannel hermes connect`: a Hermes home given a key of its own, acting only as one profile's sessions.

The key is made here (only its hash is kept) and written into the Hermes home's .env with Backchannel's URL and
the profile; the plugin is enabled in that home's config.yaml; the person's own key never leaves this home."""

from __future__ import annotations

import os
from pathlib import Path, PurePath
from typing import Any

import click

from .. import shell
from ..errors import UsageError
from ..home import config, profiles
from ..home import hermes as hermes_files
from ..home.runtime import Listening, listening
from .connect import call
from .output import emit, examples, note


@click.group("hermes")
def hermes() -> None:
    """Connect a Hermes Agent home to a profile."""


def _gateway_url(root: Path) -> str:
    """Where this home's gateway listens: the running one's address, else the one config.yaml gives it."""
    running = listening(root)
    if running is not None:
        return running.url
    settings = config.load_gateway_config(root)
    return Listening(pid=0, host=settings.host, port=settings.port, gateway_id="", started_at=0).url


def _check_url(url: str) -> str:
    if not url.startswith(("http://", "https://")) or any(c.isspace() for c in url):
        raise UsageError(f"invalid --url {url!r}: give Backchannel's address as Hermes reaches it, http(s)://HOST:PORT")
    return url.rstrip("/")


def _home_of(given: str | None) -> Path:
    raw = given if given is not None else os.environ.get("HERMES_HOME")
    if raw is None or not raw.strip():
        raise UsageError("which Hermes home? give --hermes-home DIR (or set HERMES_HOME)", code="no_hermes_home")
    return hermes_files.check(Path(raw).expanduser().absolute())


def restart_hint(home: PurePath, *, windows: bool | None = None) -> str:
    """What restarts the Hermes gateway of `home`, as typed in the shell at hand (or, with `windows`, the one
    named): cmd's `set` takes the rest of its line as it is, PowerShell a string in single quotes."""
    if shell.windows_shell() if windows is None else windows:
        quoted = str(home).replace("'", "''")
        how = f"set HERMES_HOME={home}  (PowerShell: $env:HERMES_HOME = '{quoted}'), then hermes gateway restart"
    else:
        how = f"HERMES_HOME={shell.quote(str(home), windows=False)} hermes gateway restart"
    return f"the Hermes gateway of that home: {how} (one run in a terminal: stop it, then hermes gateway run again)"


@hermes.command(
    "connect",
    epilog=examples(
        "backchannel hermes connect research --hermes-home ~/.hermes",
        "backchannel hermes connect builds --hermes-home ~/.hermes/profiles/builds --json",
        r"backchannel hermes connect research --hermes-home C:\Users\me\.hermes",
    ),
)
@click.argument("profile")
@click.option(
    "--hermes-home", "hermes_home", metavar="DIR", help="The Hermes home (its HERMES_HOME; default: $HERMES_HOME)."
)
@click.option("--url", help="Backchannel's address as Hermes reaches it (default: this home's gateway).")
@click.option("--rotate", is_flag=True, help="A new key even when the Hermes home holds this profile's key in force.")
@click.option(
    "--keep-tool-search",
    is_flag=True,
    help="Leave Hermes's tool search on (0.22 and later): the model then reaches the tools through tool_call only.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: what was made and what to restart.")
def connect(
    profile: str, hermes_home: str | None, url: str | None, rotate: bool, keep_tool_search: bool, as_json: bool
) -> None:
    """Give a Hermes home a key of its own, as PROFILE.

    \b
    The key (named hermes-PROFILE) reaches only the tools and mentions of PROFILE's sessions, under PROFILE's
    rules; Backchannel's URL, the key and the profile go into DIR/.env (0600) and the plugin is enabled in
    DIR/config.yaml (added to, nothing else changed; no network), with Hermes's tool search off so a model
    calls the tools by name (--keep-tool-search leaves it on). Run again, it keeps the key DIR/.env holds while
    that key is in force, else (or with --rotate) makes a new one: the old one stops at once. A PROFILE that does
    not exist is made, its sessions in that Hermes gateway (its API server's key from DIR/.env, or a new one
    written there). Restart the Hermes gateway afterwards: it reads .env and its plugins when it starts.
    """
    root = config.home()
    config.require_home(root)
    config.check_name(profile)
    home = _home_of(hermes_home)
    values = hermes_files.env(home)  # a .env that does not parse: refused before anything is written
    address = _check_url(url) if url is not None else _gateway_url(root)
    made_profile: dict[str, Any] | None = None
    if profile not in profiles.list_profiles(root):
        server = hermes_files.api_server(home, values)
        if server.added:
            hermes_files.set_env(home, server.added)
        var = "HERMES_" + profile.upper().replace("-", "_") + "_API_KEY"
        profiles.create_profile(root, profile, engine="hermes", model={"base_url": server.url, "api_key_env": var})
        config.set_env_value(root, var, server.key)
        made_profile = {
            "engine": "hermes",
            "base_url": server.url,
            "api_key_env": var,
            "hermes_env": sorted(server.added),
        }
    elif profiles.load_profile(root, profile).config.model.engine != "hermes":
        note(f"note: profile {profile!r} is not a hermes profile: the plugin acts only as sessions it knows")
    enabled = hermes_files.enable_plugin(home, tool_search=keep_tool_search)
    held = values.get(hermes_files.KEY_VAR)
    asked = {"profile": profile, "hermes_home": str(home), "rotate": rotate, **({"held": held} if held else {})}
    key = call("POST", "/v1/agent-keys", asked)
    value, how = key["key"], key["how"]
    wanted = {hermes_files.URL_VAR: address, hermes_files.KEY_VAR: value, hermes_files.PROFILE_VAR: profile}
    changed_env = sorted(name for name, v in wanted.items() if values.get(name) != v)
    if changed_env:
        hermes_files.set_env(home, wanted)
    changed = bool(changed_env or enabled or made_profile)
    restart = [restart_hint(home)] if changed else []
    out = {
        "profile": profile,
        "hermes_home": str(home),
        "key_name": key["name"],
        "key_was": how,
        "url": address,
        "env": str(config.env_path(home)),
        "env_set": changed_env,
        "config": str(hermes_files.config_path(home)),
        "config_added": enabled,
        "profile_made": made_profile,
        "restart": restart,
        "gateway_running": listening(root) is not None,
    }
    emit(out, as_json=as_json, text=lambda: _print(out))


def _print(out: dict[str, Any]) -> None:
    told = {"made": "made", "reused": "kept (that .env holds it, in force)", "rotated": "made anew (the old one stops)"}
    click.echo(f"connected Hermes home {out['hermes_home']!r} to profile {out['profile']!r}")
    if out["profile_made"]:
        made = out["profile_made"]
        click.echo(
            f"  profile {out['profile']}: made, engine hermes at {made['base_url']} (key in {made['api_key_env']})"
        )
    click.echo(f"  key {out['key_name']}: {told[out['key_was']]}; it acts only as {out['profile']}'s sessions")
    click.echo(f"  {out['env']}: " + (", ".join(out["env_set"]) + " set" if out["env_set"] else "unchanged"))
    click.echo(f"  {out['config']}: " + ("; ".join(out["config_added"]) if out["config_added"] else "unchanged"))
    if out["restart"]:
        click.echo("now restart:")
        for line in out["restart"]:
            click.echo(f"  {line}")
    else:
        click.echo("nothing changed: nothing to restart")
    if not out["gateway_running"]:
        click.echo("and start Backchannel's gateway (backchannel gateway): the plugin calls it")
    profile = out["profile"]
    note(f"its sessions may message what profile {profile!r} allows: backchannel profile allow {profile} TARGET")
