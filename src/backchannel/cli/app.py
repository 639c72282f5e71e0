"""The root command group and its subcommands."""

from __future__ import annotations

import click

from .. import __version__
from .chat_cmd import chat
from .gateway_cmd import gateway
from .init_cmd import init
from .peer_cmd import peer
from .profile_cmd import profile
from .runs_cmd import runs
from .send_cmd import ledger, send
from .sessions_cmd import sessions


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="backchannel")
def cli() -> None:
    """Backchannel: persistent AI agents messaging each other.

    The home is $BACKCHANNEL_HOME (default ~/.backchannel). Start with `backchannel init`.
    Exit codes: 0 ok, 1 delivery or gateway error, 2 usage error or refused by policy.
    """


for command in (init, profile, chat, sessions, send, runs, peer, ledger, gateway):
    cli.add_command(command)
