"""The `backchannel` command line: one module per command group; `main` turns errors into exit codes."""

from __future__ import annotations

import sys

import click

from ..errors import BackchannelError


def main() -> None:
    """Entry point: the one place where a BackchannelError becomes a message on stderr and an exit code."""
    from .app import cli

    try:
        cli.main(prog_name="backchannel", standalone_mode=False)
    except BackchannelError as exc:
        click.echo(f"error: {exc.message}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if isinstance(exc, click.UsageError) else exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(1)
