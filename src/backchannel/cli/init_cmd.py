"""`backchannel init`: create the home, its config.yaml, .env with an API key, and the default profile.

`--repair` rewrites a home config.yaml that cannot be loaded, keeping what it can read of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .. import shell
from ..errors import ConfigError, UsageError
from ..home import config, profiles, repair, yamledit
from .output import emit, examples, note


@click.command(
    "init",
    epilog=examples(
        "backchannel init", "BACKCHANNEL_HOME=/tmp/trial backchannel init --json", "backchannel init --repair"
    ),
)
@click.option(
    "--repair",
    "repair_config",
    is_flag=True,
    help="Rewrite a broken config.yaml, keeping its gateway id and peers (never .env's key or state.db).",
)
@click.option("--host", help="The address its gateway binds (gateway.host in config.yaml) [default: 127.0.0.1].")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    help="The port its gateway listens on (gateway.port) [default: 8377]: give each home on a machine its own.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was created as JSON.")
def init(repair_config: bool, host: str | None, port: int | None, as_json: bool) -> None:
    """Create the home (BACKCHANNEL_HOME, default ~/.backchannel). Keeps whatever already exists.

    --host and --port set where its gateway listens, in a new home or an existing one (config.yaml's other
    settings and comments are kept), so `backchannel gateway` alone starts it there."""
    root = config.home()
    if root.exists() and not root.is_dir():
        raise UsageError(f"BACKCHANNEL_HOME {str(root)!r} is a file, not a folder: point it at a folder")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the home {str(root)!r}: {exc.strerror or exc}") from exc
    created: list[str] = []
    kept: list[str] = []
    changed: list[str] = []
    cfg = config.config_path(root)
    repaired: repair.Repaired | None = None
    if cfg.exists() and repair_config:
        repaired = repair.repair_home_config(root)
        if repaired is not None:
            created.append("config.yaml (repaired)")
        else:
            kept.append("config.yaml")
    elif cfg.exists():
        try:
            config.load_gateway_config(root)  # a broken file is reported, never overwritten
        except ConfigError as exc:
            hint = "" if config.REPAIR_HINT in exc.message else f"; {config.REPAIR_HINT}"
            raise ConfigError(f"the home is broken: {exc.message}{hint}") from exc
        kept.append("config.yaml")
    else:
        config.write_yaml(cfg, config.default_home_config())
        created.append("config.yaml")
    if host is not None or port is not None:
        where = _listen_at(root, host=host, port=port)
        changed.append(f"where its gateway listens: {where} (gateway.host, gateway.port)")
    if config.read_env(root).get(config.API_KEY_VAR):
        kept.append(".env (API_SERVER_KEY)")
    else:
        config.set_env_value(root, config.API_KEY_VAR, config.new_api_key())
        created.append(".env (API_SERVER_KEY)")
    if profiles.DEFAULT_PROFILE in profiles.list_profiles(root):
        kept.append(f"profile {profiles.DEFAULT_PROFILE}")
    else:
        profiles.create_profile(root, profiles.DEFAULT_PROFILE)
        created.append(f"profile {profiles.DEFAULT_PROFILE} (engine echo)")

    def text() -> None:
        for item in created:
            click.echo(f"created {item}")
        for item in changed:
            click.echo(f"set {item}")
        if repaired is not None:
            for item in repaired.kept:
                click.echo(f"  kept {item}")
            for item in repaired.dropped:
                note(f"  could not keep {item}")
            if repaired.backup is not None:
                note(f"  the old file is at {str(repaired.backup)!r}")
        elif repair_config:
            note("config.yaml loads: nothing to repair")
        for item in kept:
            note(f"kept existing {item}")
        if not created and not changed:
            note(f"{str(root)!r} is already initialised; nothing changed")
        click.echo(f"home: {root}")
        first = shell.command("backchannel", "chat", "-q", "hello there")
        click.echo(f"next: {first}  ·  backchannel gateway  ·  backchannel profile create NAME")

    data: dict[str, Any] = {"home": str(root), "created": created, "changed": changed, "kept": kept}
    if repaired is not None:
        data["repaired"] = repaired.to_dict()
    emit(data, as_json=as_json, text=text)


def _listen_at(root: Path, *, host: str | None, port: int | None) -> str:
    """Set gateway.host / gateway.port in the home's config.yaml, keeping the rest; where it listens now."""
    path = config.config_path(root)

    def change(data: dict[str, Any]) -> None:
        gateway = data.setdefault("gateway", {})
        if host is not None:
            gateway["host"] = host
        if port is not None:
            gateway["port"] = port

    yamledit.edit(path, change, check=lambda data: config.parse_gateway_config(data, path))
    settings = config.load_gateway_config(root)
    return f"{settings.host}:{settings.port}"
