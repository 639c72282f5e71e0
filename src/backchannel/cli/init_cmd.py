"""`backchannel init`: create the home, its config.yaml, .env with an API key, and the default profile."""

from __future__ import annotations

import click

from ..errors import UsageError
from ..home import config, profiles
from .output import emit, examples, note


@click.command("init", epilog=examples("backchannel init", "BACKCHANNEL_HOME=/tmp/trial backchannel init --json"))
@click.option("--json", "as_json", is_flag=True, help="Print what was created as JSON.")
def init(as_json: bool) -> None:
    """Create the home (BACKCHANNEL_HOME, default ~/.backchannel). Keeps whatever already exists."""
    root = config.home()
    if root.exists() and not root.is_dir():
        raise UsageError(f"BACKCHANNEL_HOME {str(root)!r} is a file, not a folder: point it at a folder")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the home {str(root)!r}: {exc.strerror or exc}") from exc
    created: list[str] = []
    kept: list[str] = []
    cfg = config.config_path(root)
    if cfg.exists():
        config.load_gateway_config(root)  # a broken file is reported, never overwritten
        kept.append("config.yaml")
    else:
        config.write_yaml(cfg, config.default_home_config())
        created.append("config.yaml")
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
        for item in kept:
            note(f"kept existing {item}")
        if not created:
            note(f"{str(root)!r} is already initialised; nothing changed")
        click.echo(f"home: {root}")
        click.echo("next: backchannel chat -q 'hello'  ·  backchannel gateway  ·  backchannel profile create NAME")

    emit({"home": str(root), "created": created, "kept": kept}, as_json=as_json, text=text)
