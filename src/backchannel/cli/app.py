"""The root command group and its subcommands."""

from __future__ import annotations

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

    The home is $BACKCHANNEL_HOME (default ~/.backchannel). Start with `backchannel init`.

    \b
    Exit codes: 0 delivered, receipt or held; 1 a delivery or peer error, a failed run, an unknown outcome;
    2 a usage error or refused by policy; 130 interrupted (Ctrl-C).
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


COMMANDS = (init, profile, chat, sessions, send, runs, peer, ledger, held, approve, deny, key, gateway, mcp, doctor)
for command in COMMANDS:
    cli.add_command(command)
