"""The root command group and its subcommands; `--home PATH` on every one of them."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import click
from click.shell_completion import CompletionItem
from click_pwsh import support_pwsh_shell_completion

from .. import __version__

# `_BACKCHANNEL_COMPLETE=pwsh_source`: PowerShell's completion script, beside click's own bash, zsh and fish.
support_pwsh_shell_completion()

# Each command: its module, imported the first time the command is used (`backchannel --version` or a shell's Tab
# on a command name loads none of them; `send` loads what sending needs, not the MCP, A2A or web stacks), and the
# first paragraph of its help, which `backchannel --help` and a shell's Tab show without importing it (a test
# holds each to the command's own).
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("init_cmd", "Create the home (BACKCHANNEL_HOME, default ~/.backchannel). Keeps whatever already exists."),
    "profile": ("profile_cmd", "Agent profiles: persona, memories, skills, model, messaging rules."),
    "chat": ("chat_cmd", "Talk to an agent. Without -q, a prompt that keeps one session (Ctrl-D or /exit to leave)."),
    "sessions": ("sessions_cmd", "List sessions and read their messages."),
    "send": ("send_cmd", "Message ADDRESS as the person; print the reply, or a receipt."),
    "runs": ("runs_cmd", "This home's runs: list, show, follow, stop, wait-idle."),
    "peer": (
        "peer_cmd",
        "Other gateways (Backchannel or Hermes) and their agents. Aliases: set = add, ls = list, rm = remove.",
    ),
    "ledger": ("ledger_cmd", "Who said what to whom, newest first."),
    "held": ("held_cmd", "Messages held for your approval."),
    "approve": ("held_cmd", "Queue a held message."),
    "deny": ("held_cmd", "Refuse a held message."),
    "ask": ("ask_cmd", "Questions agents asked you: list, show, answer, cancel."),
    "key": ("key_cmd", "The person's key, and keys for peers."),
    "hermes": ("hermes_cmd", "Connect a Hermes Agent home to a profile."),
    "gateway": ("gateway_cmd", "Serve the HTTP API and run queued turns until stopped."),
    "logs": ("logs_cmd", "The gateway's log file: print it, or follow it."),
    "mcp": ("mcp_cmd", "An MCP server on stdio: the messaging tools, as PROFILE."),
    "doctor": ("doctor_cmd", "Check the home and everything it names."),
    "store": ("store_cmd", "Where this home keeps its runs, sessions and messages."),
    "group": ("group_cmd", "Groups: addresses sent to together."),
    "room": ("room_cmd", "Rooms: you and several agents in one transcript."),
}


class LazyGroup(click.Group):
    """The root group: its subcommands are named here and imported on first use, each with `--home PATH`; listed
    (`--help`, a shell's Tab) by their summaries, without importing any."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module = importlib.import_module(f"{__package__}.{COMMANDS[cmd_name][0]}")
            command = getattr(module, cmd_name)
            assert isinstance(command, click.Command) and command.name == cmd_name, cmd_name
            self.add_command(with_home(command))
        return self.commands.get(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand:  # click suggests among the imported commands only
            raise click.exceptions.NoSuchCommand(str(args[0]), possibilities=list(COMMANDS), ctx=ctx) from None

    @staticmethod
    def summary(name: str, limit: int = 45) -> str:
        """The command's one-line help, cut to `limit` characters as click cuts it (by a stand-in holding the
        help alone: the command itself is not imported)."""
        return click.Command(name, help=COMMANDS[name][1]).get_short_help_str(limit)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        with formatter.section("Commands"):
            formatter.write_dl([(name, self.summary(name, limit)) for name in names])

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        named = [
            CompletionItem(name, help=self.summary(name))
            for name in self.list_commands(ctx)
            if name.startswith(incomplete)
        ]
        return [*named, *click.Command.shell_complete(self, ctx, incomplete)]  # the group's own options


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
