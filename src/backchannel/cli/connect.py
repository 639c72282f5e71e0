"""How a CLI command reaches the agents: the running gateway when there is one, else an in-process runtime."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.directory import Router
from ..core.queue import Runtime
from ..errors import DeliveryError
from ..home import config
from ..store.sessions import SessionRow

if TYPE_CHECKING:
    from ..net.local import GatewayClient

POLL_SECONDS = 0.25
PROBE_CONNECT_SECONDS = 0.3
LOCAL_GRACE = 0.5


@dataclass(frozen=True)
class Outcome:
    profile: str
    session_id: str
    run_id: str
    state: str
    reply: str | None
    error: str | None
    queue_position: int | None
    replayed: bool
    via: str  # "gateway" or "local"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def check(self) -> Outcome:
        """Raise when the run ended without a reply (exit 1)."""
        if self.state in ("failed", "cancelled", "expired"):
            raise DeliveryError(f"run {self.run_id} {self.state}: {self.error or 'no reply'}")
        return self


@contextlib.contextmanager
def store(root: Path) -> Any:
    """A router over the home's store for reading and creating sessions; it runs no turns."""
    config.require_home(root)
    config.read_env(root)  # a broken .env stops the command before it changes anything
    runtime = Runtime(root)
    try:
        yield Router(runtime)
    finally:
        runtime.db.close()


async def find_gateway(root: Path) -> GatewayClient | None:
    """This home's running gateway, or None. A closed port is seen without loading the HTTP client."""
    settings = config.load_gateway_config(root)
    key = config.read_env(root).get(config.API_KEY_VAR)
    if not key or not settings.gateway_id or not _port_open(settings.host, settings.port):
        return None
    from ..net.local import GatewayClient

    client = GatewayClient.for_home(settings, key)
    if await client.probe(settings.gateway_id):
        return client
    await client.aclose()
    return None


async def deliver(
    root: Path,
    session: SessionRow,
    message: str,
    *,
    wait: float | None,
    idempotency_key: str | None = None,
    sender: str = "human:cli",
) -> Outcome:
    """Deliver as the person and wait up to `wait` seconds (None: until the run ends)."""
    gateway = await find_gateway(root)
    if gateway is not None:
        try:
            return await _via_gateway(gateway, session, message, wait=wait, key=idempotency_key, sender=sender)
        finally:
            await gateway.aclose()
    async with _local(root, session.id) as router:
        d = await router.deliver(session, message, sender=sender, wait=wait, idempotency_key=idempotency_key)
        run = d.run
        return Outcome(
            run.profile,
            run.session_id,
            run.id,
            run.state.value,
            run.reply,
            run.error,
            d.queue_position,
            d.replayed,
            "local",
        )


def _port_open(host: str, port: int) -> bool:
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    try:
        with socket.create_connection((host, port), timeout=PROBE_CONNECT_SECONDS):
            return True
    except OSError:
        return False


@contextlib.asynccontextmanager
async def _local(root: Path, session_id: str) -> AsyncIterator[Router]:
    runtime = Runtime(root, scope={session_id})
    await runtime.start()
    try:
        yield Router(runtime)
    finally:
        await runtime.close(grace=LOCAL_GRACE)


async def _via_gateway(
    gateway: GatewayClient, session: SessionRow, message: str, *, wait: float | None, key: str | None, sender: str
) -> Outcome:
    answer = await gateway.chat(
        session.profile, session.id, message, wait=600.0 if wait is None else wait, idempotency_key=key, sender=sender
    )
    body = answer.body
    run_id = str(body.get("run_id") or body.get("delivery_id") or "")
    if answer.status == 200:
        content = (body.get("message") or {}).get("content")
        return Outcome(
            session.profile, session.id, run_id, "completed", content, None, None, bool(body.get("replayed")), "gateway"
        )
    run_path = f"/p/{session.profile}/v1/runs/{run_id}"
    while wait is None:  # the person waits for the end: follow the run
        run = (await gateway.request("GET", run_path)).body
        if run.get("status") not in ("queued", "running"):
            return _from_run(session, run)
        await asyncio.sleep(POLL_SECONDS)
    return Outcome(
        session.profile,
        session.id,
        run_id,
        str(body.get("status", "queued")),
        None,
        None,
        body.get("queue_position"),
        bool(body.get("replayed")),
        "gateway",
    )


def _from_run(session: SessionRow, run: dict[str, Any]) -> Outcome:
    return Outcome(
        session.profile,
        session.id,
        str(run.get("run_id")),
        str(run.get("status")),
        run.get("output"),
        run.get("error"),
        run.get("queue_position"),
        False,
        "gateway",
    )
