"""The gateway process: the gateway's workers and the HTTP API in one event loop, with a graceful stop."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import secrets
import signal
import socket
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TextIO

import uvicorn
from starlette.applications import Starlette

from ..core.gateway import Gateway
from ..core.runlog import RunLog
from ..errors import UsageError
from ..home import config, modes
from ..home.runtime import GatewayLock
from .a2a.push_events import A2APushEvents
from .app import create_app
from .context import Context
from .door import person_check
from .protocol import Door, HeadLimits, protocol_class
from .stopping import StopRequest

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


def build(
    root: Path,
    *,
    grace: float = 10.0,
    instance: str = "",
    stop: StopRequest | None = None,
    run_log: TextIO | None = None,
) -> tuple[Starlette, Gateway]:
    """The app and its gateway; the gateway starts and stops with the app's lifespan. `stop` is what the
    API's stop route sets (the server that serves the app watches it); `run_log` where the run log goes
    (default: stderr)."""
    config.require_home(root)
    key = api_key(root)
    # a damaged state.db is refused here (as by every opener); A2A push notifications are delivered by this process
    gateway = Gateway(root, on_state=RunLog(run_log), push_events=A2APushEvents(), metrics=True)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gateway.start()
        try:
            yield
        finally:
            await gateway.stop(grace=grace)

    ctx = Context(gateway=gateway, api_key=key, instance=instance, grace=grace, stop=stop or StopRequest())
    return create_app(ctx, lifespan=lifespan), gateway


WSAEACCES = 10013  # Windows: the port is held by a socket with SO_EXCLUSIVEADDRUSE, or reserved by the system
WSAEADDRINUSE = 10048
IN_USE = frozenset({errno.EADDRINUSE, WSAEADDRINUSE, WSAEACCES})


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, its port this gateway's alone: a second gateway on it is refused, on Windows too."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    exclusive = getattr(socket, "SO_EXCLUSIVEADDRUSE", None)
    if exclusive is not None:  # Windows: SO_REUSEADDR there would let a second gateway share the port silently
        sock.setsockopt(socket.SOL_SOCKET, exclusive, 1)
    else:  # POSIX: a port left in TIME_WAIT by the last gateway can be taken again at once; a listening one not
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        codes = {exc.errno, getattr(exc, "winerror", None)}
        if codes & IN_USE:
            kept = " or kept by Windows (netsh int ipv4 show excludedportrange tcp)" if WSAEACCES in codes else ""
            raise UsageError(
                f"{host}:{port} is already in use (another gateway?){kept}; choose one with --port"
            ) from exc
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(
    root: Path,
    *,
    host: str | None = None,
    port: int | None = None,
    grace: float = 10.0,
    run_log: TextIO | None = None,
) -> None:
    """Run in the foreground until SIGINT (Ctrl-C; Ctrl-Break on Windows), SIGTERM or a stop asked over the
    API: stop taking work, let turns finish within `grace`. `run_log`: where the run log goes (default:
    stderr, beside the log)."""
    settings = config.load_gateway_config(root)
    modes.tighten(root)  # a home made before modes were enforced, or copied in
    instance = "gwi-" + secrets.token_hex(16)
    stop = StopRequest()
    # every file checked before anything else
    app, gateway = build(root, grace=grace, instance=instance, stop=stop, run_log=run_log)
    if gateway.shared:  # a shared store that cannot be used is said now, before this gateway says it listens
        asyncio.run(_reach_store(root))
    lock = GatewayLock(root)
    lock.acquire()  # one gateway per home: a second one stops here, naming the first
    try:
        port = settings.port if port is None else port
        _serve(
            app, lock, settings, stop, host=host or settings.host, port=port, grace=grace, root=root, instance=instance
        )
    finally:
        lock.release()
    if stop.requested:
        log.info("gateway stopped")


async def _reach_store(root: Path) -> None:
    """Connect to the home's shared store (and migrate it) as the gateway will, and let go: a store that does not
    answer, refuses the password, is of a newer schema or is another gateway's is an error here (exit 2)."""
    trial = Gateway(root)
    try:
        await trial.open()
    finally:
        await trial.aclose()


class _Server(uvicorn.Server):
    """uvicorn's server, which also shuts down when the API's stop route asks (as it does on SIGTERM)."""

    def __init__(self, config: uvicorn.Config, stop: StopRequest) -> None:
        super().__init__(config)
        self.stop = stop

    async def on_tick(self, counter: int) -> bool:
        if self.stop.requested:
            self.should_exit = True  # what uvicorn's own SIGTERM handler sets: the same shutdown follows
        return await super().on_tick(counter)


def _serve(
    app: Starlette,
    lock: GatewayLock,
    settings: config.GatewayConfig,
    stop: StopRequest,
    *,
    host: str,
    port: int,
    grace: float,
    root: Path,
    instance: str,
) -> None:
    sock = bind(host, port)
    bound_port = sock.getsockname()[1]
    lock.publish(
        host=host, port=bound_port, gateway_id=settings.gateway_id, instance=instance
    )  # the CLI finds it on any port
    log.info("gateway %s listening on http://%s:%d (home %s)", settings.gateway_id or "-", host, bound_port, root)
    ctx: Context = app.state.backchannel
    door = Door(  # the person is served past the cap: a flood of connections from others never shuts them out
        max_connections=settings.max_connections,
        reserved=settings.reserved_connections,
        is_person=person_check(ctx.api_key, app.state.web_auth),
    )
    server = _Server(
        uvicorn.Config(
            app,
            log_level="warning",
            log_config=None,  # its lines go to the gateway's log handler, in the gateway's format
            access_log=False,
            timeout_graceful_shutdown=int(grace) or 1,
            loop="auto",
            http=protocol_class(
                HeadLimits(
                    max_header_bytes=settings.max_header_bytes,
                    max_headers=settings.max_headers,
                    header_timeout=float(settings.header_timeout_seconds),
                ),
                door,
            ),
            timeout_keep_alive=settings.keepalive_timeout_seconds,
            limit_concurrency=settings.max_connections,
            lifespan="on",
            proxy_headers=False,  # a peer's address is never taken from a header; and it saves a layer per request
            server_header=False,
        ),
        stop,
    )
    # Signals are the main thread's (as uvicorn's own handlers are): served from another thread (the tests run
    # gateways in threads of one process), it is stopped over the API alone.
    if threading.current_thread() is threading.main_thread():
        # uvicorn re-raises the signal that stopped it once it is done; a graceful SIGTERM stop exits 0.
        signal.signal(signal.SIGTERM, lambda signum, frame: log.info("gateway stopped"))
        # Ctrl-Break (CTRL_BREAK_EVENT, the one console event a program can send another's process group) stops
        # it as Ctrl-C does: uvicorn shuts down gracefully on it, then re-raises it as KeyboardInterrupt (130).
        if hasattr(signal, "SIGBREAK"):
            signal.signal(signal.SIGBREAK, signal.default_int_handler)
    server.run(sockets=[sock])
