"""The root command group and its subcommands; `--home PATH` on every one of them."""

from __future__ import annotations

import os
from pathlib import Path

import click

from .. import __version__
from .chat_cmd import chat
from .doctor_cmd import doctor
from .gateway_cmd import gateway
from .held_cmd import approve, deny, held
from .init_cmd import init
from .key_cmd import key
from .ledger_cmd import ledger
from .mcp_cmd import mcp
from .peer_cmd import peer
from .profile_cmd import profile
from .runs_cmd import runs
from .send_cmd import send
from .sessions_cmd import sessions


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, invoke_without_command=True)
@click.version_option(__version__, prog_name="backchannel")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Backchannel: persistent AI agents messaging each other.

    The home is --home PATH (every command takes it), else $BACKCHANNEL_HOME, else ~/.backchannel.
    Start with `backchannel init`.

    \b
    Exit codes: 0 delivered, receipt or held; 1 a delivery or peer error, a failed run, an unknown outcome;
    2 a usage error or refused by policy; 130 interrupted (Ctrl-C).
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


HOME_ENV = "BACKCHANNEL_HOME"


def _use_home(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """`--home PATH` does what BACKCHANNEL_HOME does, for this process and all it starts (a host that starts
    `backchannel mcp` with a clean environment passes no BACKCHANNEL_HOME)."""
    if value is None:
        return
    if not value.strip():
        raise click.BadParameter("is empty: give the home's folder", ctx=ctx, param=param)
    path = Path(value).expanduser().absolute()
    if path.exists() and not path.is_dir():
        raise click.BadParameter(f"{str(path)!r} is a file, not a folder", ctx=ctx, param=param)
    os.environ[HOME_ENV] = str(path)


def with_home(command: click.Command) -> click.Command:
    """`command` and, for a group, every command under it, with the `--home PATH` option."""
    if not any(param.name == "home" for param in command.params):
        command.params.append(
            click.Option(
                ["--home"],
                metavar="PATH",
                is_eager=True,  # before any other option reads the home
                expose_value=False,
                callback=_use_home,
                help=f"The home to use (instead of ${HOME_ENV}; default ~/.backchannel).",
            )
        )
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            with_home(sub)
    return command


COMMANDS = (init, profile, chat, sessions, send, runs, peer, ledger, held, approve, deny, key, gateway, mcp, doctor)
for command in COMMANDS:
    cli.add_command(command)
with_home(cli)
