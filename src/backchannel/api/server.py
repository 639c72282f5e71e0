"""The gateway process: the runtime's workers and the HTTP API in one event loop, with a graceful stop."""

from __future__ import annotations

import contextlib
import errno
import logging
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TextIO

import uvicorn
from starlette.applications import Starlette

from ..core.directory import Router
from ..core.queue import Runtime
from ..errors import UsageError
from ..home import config
from ..store.runs import RunRow
from .app import create_app
from .context import Context

log = logging.getLogger("backchannel.gateway")
MIN_KEY_CHARS = 16


def api_key(root: Path) -> str:
    key = config.read_env(root).get(config.API_KEY_VAR, "")
    if len(key) < MIN_KEY_CHARS:
        raise UsageError(
            f"{str(config.env_path(root))!r} has no {config.API_KEY_VAR} of at least {MIN_KEY_CHARS} characters: "
            "run `backchannel init`"
        )
    return key


class RunLog:
    """One line per run state change on stderr, in the logging format, cheap enough for every turn.

    Written straight to the (line-buffered) stream: the logging machinery cost more than the turn.
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._second = -1
        self._stamp = ""

    def __call__(self, run: RunRow) -> None:
        now = time.time()
        if int(now) != self._second:
            self._second = int(now)
            self._stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        detail = f" ({run.error_code}: {run.error})" if run.error else ""
        (self._stream or sys.stderr).write(
            f"{self._stamp},{int(now * 1000) % 1000:03d} backchannel.gateway run {run.id} {run.state.value} "
            f"session={run.session_id} profile={run.profile} sender={run.sender} hops={run.hops} "
            f"attempt={run.attempts}{detail}\n"
        )


def build(root: Path, *, grace: float = 10.0, runtime: Runtime | None = None) -> tuple[Starlette, Runtime]:
    """The app and its runtime; the runtime starts and stops with the app's lifespan."""
    config.require_home(root)
    key = api_key(root)
    rt = runtime or Runtime(root)
    rt.on_state = RunLog()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await rt.start()
        try:
            yield
        finally:
            await rt.close(grace=grace)

    ctx = Context(router=Router(rt), api_key=key, settings=rt.settings, gateway_id=rt.settings.gateway_id)
    return create_app(ctx, lifespan=lifespan), rt


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"{host}:{port} is already in use (another gateway?); choose one with --port") from exc
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(root: Path, *, host: str | None = None, port: int | None = None, grace: float = 10.0) -> None:
    """Run in the foreground until SIGINT/SIGTERM: stop taking work, let turns finish within `grace`."""
    settings = config.load_gateway_config(root)
    app, _runtime = build(root, grace=grace)
    host = host or settings.host
    port = settings.port if port is None else port
    sock = bind(host, port)
    bound_port = sock.getsockname()[1]
    log.info("gateway %s listening on http://%s:%d (home %s)", settings.gateway_id or "-", host, bound_port, root)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=int(grace) or 1,
            loop="auto",
            http="auto",
            lifespan="on",
            proxy_headers=False,  # a peer's address is never taken from a header; and it saves a layer per request
            server_header=False,
        )
    )
    # uvicorn re-raises the signal that stopped it once it is done; a graceful SIGTERM stop exits 0.
    signal.signal(signal.SIGTERM, lambda signum, frame: log.info("gateway stopped"))
    server.run(sockets=[sock])
