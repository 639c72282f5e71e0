"""`backchannel runs list | show | follow | stop | wait-idle`: this home's runs, as a person sees, stops and waits
for them."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import click

from ..home import config
from ..home.profiles import config_error
from ..net import wire
from ..net.http import quote, with_query
from ..outcome import Outcome, Result
from ..states import RunState
from . import complete
from .connect import call, gateway_link, local_session
from .link import Where
from .output import WIDE_HELP, emit, examples, note, show_progress, table, when

STATES = [s.value for s in RunState]
ENDED = frozenset(s.value for s in RunState if s.terminal)


@click.group("runs")
def runs() -> None:
    """This home's runs: list, show, follow, stop, wait-idle.

    A run is one message to one session, answered as one turn; follow it until it ends, or stop it.

    \b
    Examples:
      backchannel runs list --state queued --state running
      backchannel runs follow run_0123abcd…
      backchannel runs stop run_0123abcd…
    """


@runs.command(
    "list",
    epilog=examples(
        "backchannel runs list --state queued --state running", "backchannel runs list -p builds --limit 10 --json"
    ),
)
@click.option(
    "--state", "states", multiple=True, type=click.Choice(STATES), help="Only runs in this state (repeatable)."
)
@click.option(
    "-p",
    "--profile",
    "where",
    metavar="PROFILE|SESSION",
    shell_complete=complete.sessions,
    help="Only this profile's runs, or one session's (profile/session-id or a session id).",
)
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="At most this many.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.option("--wide", is_flag=True, help=WIDE_HELP)
def list_(states: tuple[str, ...], where: str | None, limit: int, as_json: bool, wide: bool) -> None:
    """Runs, newest first, with their state and queue position.

    A queued run of a profile whose config.yaml is broken says so (paused); it resumes once the file is
    valid again."""
    root = config.home()
    found = call("GET", with_query("/v1/runs", state=states, address=where, limit=limit))["data"]
    queued_profiles = {d["profile"] for d in found if d["state"] == RunState.QUEUED.value}
    paused = {name: error for name in queued_profiles if (error := config_error(root, name)) is not None}

    def why(d: dict[str, Any]) -> str | None:
        return paused.get(d["profile"]) if d["state"] == RunState.QUEUED.value else None

    def text() -> None:
        rows = []
        for d in found:
            state = d["state"] + (f" #{d['queue_position']}" if d.get("queue_position") else "")
            if (error := why(d)) is not None:
                state += f" (paused: {error})"
            first = d["message"].strip().splitlines()[0] if d["message"].strip() else ""
            rows.append(
                [
                    d["run_id"],
                    f"{d['profile']}/{d['session_id']}",
                    state,
                    d["sender"],
                    when(d["created_at"]),
                    first if wide else first[:40],
                ]
            )
        headers = ["RUN", "SESSION", "STATE", "FROM", "CREATED", "MESSAGE"]
        # A run's id may be cut too: `runs show|follow|stop` take the start of one, as the table shows it.
        table(rows, headers, fit=("MESSAGE", "FROM", "SESSION", "RUN"), drop=("CREATED",), wide=wide)
        if not found:
            note("no runs" + (" in these states" if states else ""))

    emit([{**d, "paused": why(d)} for d in found], as_json=as_json, text=text)


@runs.command("show", epilog=examples("backchannel runs show run_0123…"))
@click.argument("run_id", shell_complete=complete.run_ids)
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
def show(run_id: str, as_json: bool) -> None:
    """One run: its state, what was said and what came back. Exits 1 when it failed."""
    d = call("GET", f"/v1/runs/{quote(run_id)}/record")
    result = wire.result_of(d, to=d["to"])
    emit(d, as_json=as_json, text=lambda: _print(result, d["message"]))
    sys.exit(result.outcome.exit_code)


WHOLE_RUN_ID = len("run_") + 32


def whole_run_id(given: str) -> str:
    """The id of the run `given` names: itself, or the run whose id it starts, as a table shortens it (`run_d212…`,
    8 characters or more); several such runs are a usage error that says so."""
    if len(given) == WHOLE_RUN_ID:
        return given
    return str(call("GET", f"/v1/runs/{quote(given)}/record")["run_id"])


@runs.command("follow", epilog=examples("backchannel runs follow run_0123…"))
@click.argument("run_id", shell_complete=complete.run_ids)
@click.option("--json", "as_json", is_flag=True, help="At the end, print the run as JSON.")
def follow(run_id: str, as_json: bool) -> None:
    """Show a run's progress until it ends, then its reply. Without a gateway the run is worked here."""
    result = asyncio.run(_follow(whole_run_id(run_id), still=not as_json))
    emit(result.to_dict(), as_json=as_json, text=lambda: _print(result, None))
    sys.exit(result.outcome.exit_code)


async def _follow(run_id: str, *, still: bool) -> Result:
    async with gateway_link(config.home()) as link:
        await link.run(run_id)  # an unknown run: a usage error before anything
        await show_progress(run_id, link.events(run_id), still=still)
        return await link.run(run_id)


@runs.command("stop", epilog=examples("backchannel runs stop run_0123…", "backchannel runs stop run_0123… --json"))
@click.argument("run_id", shell_complete=complete.run_ids)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the run as JSON, with `stopped` (whether this stopped it)."
)
def stop(run_id: str, as_json: bool) -> None:
    """Cancel a queued or held run, or interrupt a running turn.

    An interrupted turn keeps what it produced so far. A run that already ended is left as it is ("nothing to
    stop"). Exits 0 when the run is stopped, or had nothing to stop; 1 when it could not be stopped.
    """
    root = config.home()
    run_id = whole_run_id(run_id)

    async def go() -> tuple[Result, Result]:
        async with gateway_link(root) as link:
            before = await link.run(run_id)
            if before.state in ENDED:
                return before, before
            return before, await link.stop(run_id)

    before, result = asyncio.run(go())
    stopped = before.state not in ENDED and result.state == RunState.CANCELLED.value

    def text() -> None:
        if stopped:
            click.echo(f"run {run_id} cancelled (it was {before.state}); what it produced so far is kept")
            if result.reply:
                click.echo(result.reply)
        elif result.state in ENDED:
            click.echo(f"run {run_id} already ended ({result.state}); nothing to stop")
        else:
            _print(result, None)

    emit({**result.to_dict(), "stopped": stopped}, as_json=as_json, text=text)
    sys.exit(0 if stopped or before.state in ENDED else 1)  # what the stop did, not the run's outcome


IDLE_LOOK_SECONDS = 0.25  # how often wait-idle looks at the session's queue


@runs.command(
    "wait-idle",
    epilog=examples("backchannel runs wait-idle builds", "backchannel runs wait-idle research/ses_0123… --timeout 60"),
)
@click.argument("address", shell_complete=complete.sessions)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SECONDS",
    help="Give up after this many seconds (exit 1). Default: wait as long as it takes.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the session and whether it is idle as JSON.")
def wait_idle(address: str, timeout: float | None, as_json: bool) -> None:
    """Wait until a session is idle: nothing queued or running.

    Exits 0 once session ADDRESS is idle: a profile (its Bot Chat), profile/session-id or a session id of
    this home. Exits 1 when --timeout passes first, saying what is still queued or running. An agent asks
    the same with its notify_when_idle tool (the notice comes into its session).
    """
    root = config.home()

    async def wait() -> tuple[Where, list[dict[str, Any]]]:
        async with gateway_link(root, works=False) as link:
            where = await local_session(link, address)
            deadline = None if timeout is None else time.monotonic() + timeout
            busy_now = with_query("/v1/runs", state=BUSY, address=where.to, limit=100)
            said = False
            while True:
                busy: list[dict[str, Any]] = (await link.client.request("GET", busy_now)).body["data"]
                if not busy or (deadline is not None and time.monotonic() >= deadline):
                    return where, busy
                if not said and not as_json:
                    note(f"{where.to}: {_busy_text(busy)}; waiting until it is idle")
                    said = True
                await asyncio.sleep(IDLE_LOOK_SECONDS)

    where, busy = asyncio.run(wait())
    idle = not busy
    shown = {
        "to": where.to,
        "session_id": where.session_id,
        "idle": idle,
        "queued": [d["run_id"] for d in busy if d["state"] == RunState.QUEUED.value],
        "running": [d["run_id"] for d in busy if d["state"] == RunState.RUNNING.value],
    }

    def text() -> None:
        if idle:
            click.echo(f"{where.to}: idle (nothing queued or running)")
        else:
            click.echo(f"{where.to}: still busy after {timeout:g} s: {_busy_text(busy)}")

    emit(shown, as_json=as_json, text=text)
    sys.exit(0 if idle else 1)


BUSY = (RunState.QUEUED.value, RunState.RUNNING.value)


def _busy_text(busy: list[dict[str, Any]]) -> str:
    running = sum(1 for d in busy if d["state"] == RunState.RUNNING.value)
    return f"{running} running, {len(busy) - running} queued"


def _print(result: Result, message: str | None) -> None:
    position = f" (position {result.queue_position})" if result.queue_position else ""
    click.echo(f"{result.run_id}: {result.state}{position} in {result.to}")
    if message is not None:
        click.echo(f"message: {message}")
    if result.consumed_word is not None:
        click.echo(result.consumed_word)
    if result.reply:
        click.echo(result.reply)
    if result.outcome is Outcome.FAILED and result.error:
        note(f"{result.state}: {result.error}")
