"""`backchannel doctor`: check the home, its profiles, their endpoints, the gateway and the peers; one line each."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING

import click

from ..home import config
from .output import emit, examples, show_config_warnings

if TYPE_CHECKING:  # the checks load everything they check: when they run, not for `doctor --help`
    from ..doctor import Report


@click.command(
    "doctor",
    epilog=examples("backchannel doctor", "backchannel doctor --deep", "backchannel doctor --json | jq '.checks[]'"),
)
@click.option(
    "--deep", is_flag=True, help="Check state.db with SQLite's full integrity_check (slower) instead of quick_check."
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object: {ok, checks: [{check, status, detail, fix?}]}."
)
def doctor(deep: bool, as_json: bool) -> None:
    """Check the home and everything it names.

    One line per check: ok, warn or FAIL, each with what to do.

    \b
    Checks config.yaml and .env (mode 0600), state.db (opens, intact), every profile's config.yaml (unknown keys,
    wrong values), each openai endpoint (answers /models, lists the model), whether this home's
    gateway runs and where, whether every peer answers and accepts its key, and whether each Hermes home
    connected with `hermes connect` still holds its key in force and enables the plugin.
    Exit 0 when nothing failed (warnings allowed), 1 when something did.
    """
    from ..doctor import examine

    show_config_warnings("nowhere")  # each is a check of the report
    report = asyncio.run(examine(config.home(), deep=deep))
    emit(report.to_dict(), as_json=as_json, text=lambda: _print(report))
    sys.exit(report.exit_code)


def _print(report: Report) -> None:
    from ..doctor import Status

    for c in report.checks:
        line = f"{c.status.label:<4}  {c.check}: {c.detail}"
        click.echo(line + (f" — fix: {c.fix}" if c.fix and c.status is not Status.OK else ""))
    failed, warned = report.count(Status.FAIL), report.count(Status.WARN)
    if failed or warned:
        click.echo(f"{failed} failed, {warned} warning{'s' * (warned != 1)}")
    else:
        click.echo("all checks ok")
