"""`backchannel gateway`: run the gateway in the foreground; `backchannel gateway stop`: stop it gracefully;
`gateway install`, `uninstall`, `status`: the gateway as a service of the user's session (`gateway_service`)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TextIO, cast

import click
from click.core import ParameterSource

from ..errors import BackchannelError, UsageError
from ..home import config
from ..home.gateway_log import LOG_FORMAT as LOG_FORMAT
from ..home.gateway_log import LogFile, Tee
from . import gateway_service
from .gateway_stop import stop_gateway
from .output import emit, examples, note, show_config_warnings


@click.group(
    "gateway",
    invoke_without_command=True,
    subcommand_metavar="[stop | install | uninstall | status]",
    epilog=examples(
        "backchannel gateway",
        "backchannel gateway --port 8400 --grace 30",
        "backchannel gateway stop",
        "backchannel gateway install",
        "backchannel gateway status",
    ),
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
    terminal (the graceful stop on Windows, where it has no SIGTERM). Its log goes to stderr and to
    `logs/gateway.log` in the home (`backchannel logs`). To keep it running, restarted when it fails and started
    at logon: `backchannel gateway install`.
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
    file = log_in_one_format(root)
    show_config_warnings("log")  # an unknown config key is a line of the gateway's log
    run_log = cast(TextIO, Tee(file)) if file is not None else None  # the run log's lines in the file too
    try:
        serve(root, host=host, port=port, grace=grace, run_log=run_log)
    except BackchannelError as exc:  # said on stderr as every command's error; in a log file kept from before too
        failed = logging.LogRecord(
            "backchannel.gateway", logging.ERROR, __file__, 0, "cannot start: %s", (exc.message,), None
        )
        for handler in logging.getLogger().handlers:
            if isinstance(handler, LogFile) and Path(handler.baseFilename).is_file():  # a refusal makes no file
                handler.handle(failed)
        raise


QUIET = ("httpx", "httpcore")  # a line per outbound request (peers, engines) is noise; their warnings still show


def log_in_one_format(root: Path | None = None) -> LogFile | None:
    """Every line of the gateway's log in one format, the libraries' too: uvicorn is served without logging
    config of its own (its loggers reach this handler), and MCP's session manager logs through it as well.

    On stderr, and (given the home, once it has a config) in the home's log file `logs/gateway.log` too, rotated
    as its `logs:` section says."""
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if root is not None and config.config_path(root).is_file():
        try:
            settings = config.load_gateway_config(root).logs
        except BackchannelError:
            settings = None  # the gateway refuses to start, saying why, and leaves the home as it was
        if settings is not None:
            handlers.append(LogFile(root, max_bytes=settings.max_bytes, keep=settings.keep))
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, force=True, handlers=handlers)
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    return next((h for h in handlers if isinstance(h, LogFile)), None)


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
    done = asyncio.run(stop_gateway(root))

    def text() -> None:
        if done.result == "not_running":
            note(f"no gateway is running for the home {str(root)!r}: nothing to stop")
        else:
            click.echo(f"gateway {done.gateway_id or '-'} (pid {done.pid}, {done.url}) stopped")

    emit(done.to_dict(), as_json=as_json, text=text)


for _command in (gateway_service.install, gateway_service.uninstall, gateway_service.status):
    gateway.add_command(_command)
