"""`backchannel profile create | list | show | remove`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import ConfigError, UsageError
from ..home import config, files, profiles
from ..home.profiles import Profile
from ..net.http import quote
from . import complete
from .connect import call
from .output import WIDE_HELP, emit, examples, note, table
from .profile_view import describe, print_facts
from .rules_cmd import RULE_COMMANDS


@click.group("profile")
def profile() -> None:
    """Agent profiles: persona, memories, skills, model, messaging rules.

    Create, list, show and remove them; change who they may message and who may message them (allow,
    accept, hold, budget) without an editor.
    """


@profile.command(
    "create",
    epilog=examples(
        "backchannel profile create research --soul research-soul.md",
        "backchannel profile create coder --engine openai --base-url http://127.0.0.1:11434/v1 --model qwen2.5:7b",
        "backchannel profile create research --engine hermes --base-url http://127.0.0.1:8642 "
        "--api-key-env HERMES_API_SERVER_KEY",
    ),
)
@click.argument("name")
@click.option("--soul", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="A file to use as SOUL.md.")
@click.option("--engine", type=click.Choice(profiles.ENGINES), default="echo", show_default=True)
@click.option(
    "--base-url",
    help="openai: the OpenAI-compatible endpoint (http://127.0.0.1:11434/v1); hermes: the Hermes gateway's API "
    "server (http://127.0.0.1:8642).",
)
@click.option("--model", "model_name", help="openai engine: the model name sent to the endpoint.")
@click.option(
    "--api-key-env",
    help="openai and hermes engines: the variable (in .env or the environment) holding the key (hermes: the "
    "gateway's API_SERVER_KEY).",
)
@click.option("--hermes-profile", help="hermes engine: the Hermes profile, served at <base-url>/p/<profile>/.")
@click.option("--json", "as_json", is_flag=True, help="Print the new profile as JSON.")
def create(
    name: str,
    soul: Path | None,
    engine: profiles.EngineName,
    base_url: str | None,
    model_name: str | None,
    api_key_env: str | None,
    hermes_profile: str | None,
    as_json: bool,
) -> None:
    """Create profile NAME (lower-case letters, digits, '-' and '_').

    With --engine hermes its sessions live in a Hermes gateway: a turn is one turn of the Hermes agent in
    the mapped Hermes session (its Bot Chat is Hermes's `Bot Chat`)."""
    root = config.home()
    config.require_home(root)
    if engine == "echo" and (base_url or model_name or api_key_env):
        raise UsageError("--base-url, --model and --api-key-env apply to --engine openai or hermes")
    if engine == "hermes" and model_name:
        raise UsageError("--model applies to --engine openai: a Hermes gateway uses the model its profile names")
    if hermes_profile and engine != "hermes":
        raise UsageError("--hermes-profile applies to --engine hermes")
    soul_text = files.read_text(soul, error=UsageError) if soul is not None else None
    p = profiles.create_profile(
        root,
        name,
        soul=soul_text,
        engine=engine,
        model={
            "base_url": base_url or "",
            "default": model_name or "",
            "api_key_env": api_key_env or "",
            "profile": hermes_profile or "",
        },
    )
    emit(
        describe(p), as_json=as_json, text=lambda: click.echo(f"created profile {p.name} (engine {engine}) at {p.path}")
    )


@profile.command("list", epilog=examples("backchannel profile list", "backchannel profile list --json"))
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout (an error too, as one object).")
@click.option("--wide", is_flag=True, help=WIDE_HELP)
def list_(as_json: bool, wide: bool) -> None:
    """List the profiles of this home.

    A profile whose config.yaml cannot be read is listed too, with its error.
    """
    root = config.home()
    config.require_home(root)
    found: list[Profile] = []
    broken: dict[str, str] = {}
    for name in profiles.list_profiles(root):
        try:
            found.append(profiles.load_profile(root, name))
        except ConfigError as exc:
            broken[name] = exc.message
    rows = [describe(p) for p in found] + [
        {"name": n, "error": {"code": "invalid_config", "message": m}} for n, m in broken.items()
    ]
    rows.sort(key=lambda r: str(r["name"]))

    def text() -> None:
        table(
            [
                [str(r["name"]), *(("BROKEN", "-") if "error" in r else (str(r["engine"]), str(r["model"] or "-")))]
                for r in rows
            ],
            ["NAME", "ENGINE", "MODEL"],
            fit=("MODEL",),
            wide=wide,
        )
        for name, message in broken.items():
            note(f"profile {name} is broken: {message}")

    emit(rows, as_json=as_json, text=text)


@profile.command("show", epilog=examples("backchannel profile show research"))
@click.argument("name", shell_complete=complete.profile_names)
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout (an error too, as one object).")
def show(name: str, as_json: bool) -> None:
    """Show one profile: model, skills, memory sizes and messaging rules."""
    root = config.home()
    config.require_home(root)
    data = describe(profiles.load_profile(root, name))
    emit(data, as_json=as_json, text=lambda: print_facts(data))


@profile.command(
    "remove",
    epilog=examples("backchannel profile remove scratch", "backchannel profile remove scratch --yes"),
)
@click.argument("name", shell_complete=complete.profile_names)
@click.option("--yes", is_flag=True, help="Do not ask (needed when stdin is not a terminal).")
def remove(name: str, yes: bool) -> None:
    """Remove profile NAME, keeping its history.

    Its folder is set aside (renamed, not deleted) and its sessions stay in the store. A profile with runs
    still queued or running, or with messages held for your approval, is not removed: stop them (backchannel
    runs list -p NAME) or approve or deny them (backchannel held -p NAME) first."""
    root = config.home()
    config.require_home(root)
    path = f"/v1/profiles/{quote(name)}"
    call("DELETE", f"{path}?dry_run=true")  # refused while it has runs queued or running
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError("removing a profile needs --yes when stdin is not a terminal")
        click.confirm(f"remove profile {name} (its folder is set aside, its sessions stay)?", abort=True)
    removed = call("DELETE", path)
    click.echo(f"removed profile {name}; its folder is now {removed['folder']}")
    old = removed["bot_chat"]
    if old is not None:
        note(
            f"its Bot Chat is kept as {old['title']!r} (session {old['id']}, readable with `backchannel sessions show "
            f"{old['id']}` and in the ledger); a profile created again as {name} gets a new Bot Chat"
        )


for command in RULE_COMMANDS:
    profile.add_command(command)
