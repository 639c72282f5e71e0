"""`backchannel gateway`: run the gateway in the foreground."""

from __future__ import annotations

import logging

import click

from ..home import config
from .output import examples, show_config_warnings


@click.command("gateway", epilog=examples("backchannel gateway", "backchannel gateway --port 8400 --grace 30"))
@click.option("--host", help="Address to bind (default from config.yaml: 127.0.0.1).")
@click.option(
    "--port", type=click.IntRange(0, 65535), help="Port (default from config.yaml: 8377; 0 picks a free one)."
)
@click.option(
    "--grace",
    type=click.FloatRange(0, 3600),
    default=10.0,
    show_default=True,
    help="Seconds running turns get to finish on SIGTERM before they are requeued.",
)
def gateway(host: str | None, port: int | None, grace: float) -> None:
    """Serve the HTTP API and run queued turns until SIGINT or SIGTERM."""
    from ..api.server import serve  # the server stack is loaded only by the command that serves

    log_in_one_format()
    show_config_warnings("log")  # an unknown config key is a line of the gateway's log
    serve(config.home(), host=host, port=port, grace=grace)


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
QUIET = ("httpx", "httpcore")  # a line per outbound request (peers, engines) is noise; their warnings still show


def log_in_one_format() -> None:
    """Every line of the gateway's log in one format, the libraries' too: uvicorn is served without logging
    config of its own (its loggers reach this handler), and MCP's session manager logs through it as well."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, force=True)
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
