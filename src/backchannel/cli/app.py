"""The root command group and its subcommands; `--home PATH` on every one of them."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import click

from .. import __version__

# Each command's module, imported the first time the command is used (`backchannel --version` or a shell's Tab
# on a command name loads none of them; `send` loads what sending needs, not the MCP, A2A or web stacks).
COMMANDS: dict[str, str] = {
    "init": "init_cmd",
    "profile": "profile_cmd",
    "chat": "chat_cmd",
    "sessions": "sessions_cmd",
    "send": "send_cmd",
    "runs": "runs_cmd",
    "peer": "peer_cmd",
    "ledger": "ledger_cmd",
    "held": "held_cmd",
    "approve": "held_cmd",
    "deny": "held_cmd",
    "key": "key_cmd",
    "gateway": "gateway_cmd",
    "mcp": "mcp_cmd",
    "doctor": "doctor_cmd",
    "store": "store_cmd",
    "group": "group_cmd",
    "room": "room_cmd",
}


class LazyGroup(click.Group):
    """The root group: its subcommands are named here and imported on first use, each with `--home PATH`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module = importlib.import_module(f"{__package__}.{COMMANDS[cmd_name]}")
            command = getattr(module, cmd_name)
            assert isinstance(command, click.Command) and command.name == cmd_name, cmd_name
            self.add_command(with_home(command))
        return self.commands.get(cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]}, invoke_without_command=True)
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


with_home(cli)
