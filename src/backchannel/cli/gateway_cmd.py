"""`backchannel gateway`: run the gateway in the foreground; `backchannel gateway stop`: stop it gracefully."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from .. import procs
from ..errors import BackchannelError, GatewayError, UsageError
from ..home import config, runtime
from ..home.gateway_log import LOG_FORMAT as LOG_FORMAT
from ..home.gateway_log import LogFile
from ..home.home_file import LogSettings
from .connect import find_gateway
from .output import emit, examples, note, show_config_warnings

POLL_SECONDS = 0.1
STOP_MARGIN_SECONDS = 15.0  # past twice the grace (open requests, then running turns), for closing the store


@click.group(
    "gateway",
    invoke_without_command=True,
    subcommand_metavar="[stop]",
    epilog=examples("backchannel gateway", "backchannel gateway --port 8400 --grace 30", "backchannel gateway stop"),
)
@click.option("--host", help="Address to bind (default from config.yaml: 127.0.0.1).")
@click.option(
    "--port", type=click.IntRange(0, 65535), help="Port (default from config.yaml: 8377; 0 picks a free one)."
)
@click.option(
    "--grace",
    type=click.FloatRange(0, 3600),
    default=10.0,
    show_default=True,
    help="Seconds running turns get to finish on a stop before they are requeued.",
)
@click.pass_context
def gateway(ctx: click.Context, host: str | None, port: int | None, grace: float) -> None:
    """Serve the HTTP API and run queued turns until stopped.

    Stop it with Ctrl-C (or Ctrl-Break) in its console, SIGTERM, or `backchannel gateway stop` from any
    terminal (the graceful stop on Windows, where it has no SIGTERM).
    """
    if ctx.invoked_subcommand is not None:
        given = [
            f"--{name}"
            for name in ("host", "port", "grace")
            if ctx.get_parameter_source(name) != ParameterSource.DEFAULT
        ]
        if given:
            raise UsageError(
                f"{', '.join(given)}: options of the gateway itself, not of `gateway {ctx.invoked_subcommand}`"
            )
        return
    from ..api.server import serve  # the server stack is loaded only by the command that serves

    root = config.home()
    log_in_one_format(root)
    show_config_warnings("log")  # an unknown config key is a line of the gateway's log
    try:
        serve(root, host=host, port=port, grace=grace)
    except BackchannelError as exc:  # said on stderr as every command's error; in the log file too (a service's)
        failed = logging.LogRecord("backchannel.gateway", logging.ERROR, __file__, 0, "cannot start: %s", (exc.message,), None)
        for handler in logging.getLogger().handlers:
            if isinstance(handler, LogFile):
                handler.handle(failed)
        raise


QUIET = ("httpx", "httpcore")  # a line per outbound request (peers, engines) is noise; their warnings still show


def log_in_one_format(root: Path | None = None) -> None:
    """Every line of the gateway's log in one format, the libraries' too: uvicorn is served without logging
    config of its own (its loggers reach this handler), and MCP's session manager logs through it as well.

    On stderr, and (given the home, once it has a config) in the home's log file `logs/gateway.log` too, rotated
    as its `logs:` section says."""
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if root is not None and config.config_path(root).is_file():
        try:
            settings = config.load_gateway_config(root).logs
        except BackchannelError:
            settings = LogSettings()  # the gateway says what is wrong with the config as it starts
        handlers.append(LogFile(root, max_bytes=settings.max_bytes, keep=settings.keep))
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, force=True, handlers=handlers)
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)


@dataclass(frozen=True)
class Stopped:
    """What `gateway stop` did: `stopped` a gateway, or found `not_running`."""

    result: str
    gateway_id: str = ""
    pid: int | None = None
    url: str = ""
    grace_seconds: float | None = None
    running_turns: int | None = None
    seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "result": self.result,
            "gateway_id": self.gateway_id or None,
            "pid": self.pid,
            "url": self.url or None,
            "grace_seconds": self.grace_seconds,
            "running_turns": self.running_turns,
            "seconds": None if self.seconds is None else round(self.seconds, 3),
        }


@gateway.command("stop", epilog=examples("backchannel gateway stop", "backchannel gateway stop --json"))
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout (an error too, as one object).")
def stop(as_json: bool) -> None:
    """Stop this home's gateway and wait until it is gone.

    It stops as on SIGTERM: it takes no new work, lets running turns finish within its --grace, puts those
    still running back in the queue (they run again on its next start) and releases the home. It is asked over
    its API with the home's key, so this works on Windows too, where a gateway has no SIGTERM. Exit 0 when it
    stopped, or when no gateway runs for this home (nothing to stop); 1 when it could not be reached or did
    not end in time.
    """
    root = config.home()
    config.require_home(root)
    done = asyncio.run(_stop(root))

    def text() -> None:
        if done.result == "not_running":
            note(f"no gateway is running for the home {str(root)!r}: nothing to stop")
        else:
            click.echo(f"gateway {done.gateway_id or '-'} (pid {done.pid}, {done.url}) stopped")

    emit(done.to_dict(), as_json=as_json, text=text)


async def _stop(root: Path) -> Stopped:
    found = runtime.listening(root)
    if found is None:
        if runtime.held(root):
            raise GatewayError(
                f"a gateway holds the home {str(root)!r} but has not said where it listens (still starting?): "
                "try again in a moment"
            )
        return Stopped("not_running")
    client = await find_gateway(root)
    if client is None:
        if not runtime.held(root) or not procs.alive(found.pid):
            return Stopped("not_running")  # it ended meanwhile
        raise GatewayError(
            f"the gateway of this home (pid {found.pid}) does not answer at {found.url} as itself (stopping "
            f"already, or stuck): wait, or stop it in its console (Ctrl-C), or end process {found.pid}"
        )
    try:
        answer = await client.request("POST", "/v1/gateway/stop")
    finally:
        await client.aclose()
    body = answer.body
    grace = float(body.get("grace_seconds") or 0)
    running = int(body.get("running_turns") or 0)
    gateway_id = str(body.get("gateway_id") or found.gateway_id)
    turns = f"{running} turn{'' if running == 1 else 's'} running"
    note(
        f"stopping gateway {gateway_id} (pid {found.pid}, {found.url}): {turns}, given up to {grace:g} s to finish "
        "(a turn still running then is requeued, and runs again on the next start)"
    )
    started = time.monotonic()
    deadline = started + 2 * grace + STOP_MARGIN_SECONDS
    while runtime.held(root) and procs.alive(found.pid):  # the lock goes when it has stopped (a zombie holds none)
        if time.monotonic() > deadline:
            raise GatewayError(
                f"gateway {gateway_id} (pid {found.pid}) is still running {time.monotonic() - started:.0f} s after "
                f"it was asked to stop: see its log; end process {found.pid} to stop it now (nothing is lost: "
                "its running turns run again on the next start)"
            )
        await asyncio.sleep(POLL_SECONDS)
    return Stopped(
        "stopped",
        gateway_id=gateway_id,
        pid=found.pid,
        url=found.url,
        grace_seconds=grace,
        running_turns=running,
        seconds=time.monotonic() - started,
    )
