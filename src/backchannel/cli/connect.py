"""How a CLI command reaches the agents: the running gateway when there is one, else the same gateway in-process."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import addresses
from ..addresses import RemoteAddress
from ..core.delivery.delivery import Incoming
from ..core.gateway import Gateway, running
from ..errors import BackchannelError, DeliveryError, Interrupted, UsageError
from ..home import config
from ..home.runtime import listening
from ..outcome import Outcome, Result, of_state
from ..store.sessions import SessionRow

if TYPE_CHECKING:
    from ..net.local import GatewayClient

POLL_SECONDS = 0.25
PROBE_CONNECT_SECONDS = 0.3
LOCAL_GRACE = 0.5
FOLLOW_WAIT_SECONDS = 600.0


@dataclass(frozen=True)
class Sent:
    """A person's message and its outcome, and whether the running gateway or this process handled it."""

    profile: str
    result: Result
    via: str  # "gateway" or "local"

    def to_dict(self) -> dict[str, Any]:
        return {**self.result.to_dict(), "profile": self.profile, "via": self.via}

    def check(self) -> Sent:
        """Raise when the run ended without a reply (exit 1)."""
        if self.result.outcome is Outcome.FAILED:
            raise DeliveryError(
                f"run {self.result.run_id} {self.result.state}: {self.result.error or 'no reply'}",
                code=self.result.code or "run_failed",
                details={"run_id": self.result.run_id, "state": self.result.state},
            )
        return self


@contextlib.contextmanager
def interruptible(root: Path, ask_again: str, *, key: str) -> Iterator[None]:
    """Ctrl-C while a message is on its way: say it may be accepted (as which run, when the store knows it yet),
    and the exact command that asks again safely."""
    try:
        yield
    except KeyboardInterrupt:
        run_id = _run_id_of(root, key)
        accepted = f"accepted as run {run_id}" if run_id else "accepted"
        raise Interrupted(
            f"interrupted: the message may already be {accepted} (it goes on if so); ask about it again, safely "
            f"(the same key: it is handled once), with:\n  {ask_again}"
        ) from None


def _run_id_of(root: Path, key: str) -> str | None:
    """The run a message was filed under, read from the home's store (None when it cannot be read)."""
    try:
        with home_gateway(root) as gateway:
            return gateway.delivery.run_id_of(key)
    except BackchannelError:
        return None


@contextlib.contextmanager
def home_gateway(root: Path) -> Iterator[Gateway]:
    """This home's gateway, not started: for reading and creating sessions, the ledger, and peers."""
    gateway = Gateway(root)
    try:
        yield gateway
    finally:
        gateway.close()


def local_session(gateway: Gateway, text: str) -> SessionRow:
    """The existing session a local address names, in any form of the grammar: `profile/session-id`, a session
    id, or a profile alone (its Bot Chat)."""
    parsed = addresses.parse(text)
    if isinstance(parsed, RemoteAddress):
        raise UsageError(f"{text!r} is a peer address: give a session of this home (profile, profile/id or an id)")
    return gateway.directory.existing(parsed)


async def find_gateway(root: Path) -> GatewayClient | None:
    """This home's running gateway, or None: where its runtime file says it listens (whatever port it was
    started on), once that port's `/health` names the instance the file records. The key is never sent to a
    port before that: whatever else listens there (the gateway stopped, another program took the port) gets
    nothing. A closed port is seen without loading the HTTP client."""
    settings = config.load_gateway_config(root)
    key = config.read_env(root).get(config.API_KEY_VAR)
    found = listening(root)
    if found is None or not found.instance:
        return None  # no gateway of this home is running (or one too old to name its instance)
    settings = settings.model_copy(update={"host": found.host, "port": found.port})
    if not key or not settings.gateway_id or not _port_open(settings.host, settings.port):
        return None
    from ..net.local import GatewayClient

    client = GatewayClient.for_home(settings, key)
    if await client.probe(settings.gateway_id, found.instance):
        return client
    await client.aclose()
    return None


async def deliver(
    root: Path, session: SessionRow, message: str, *, wait: float | None, key: str, sender: str = "human:cli"
) -> Sent:
    """Deliver as the person and wait up to `wait` seconds (None: until the run ends)."""
    gateway = await find_gateway(root)
    if gateway is not None:
        try:
            return await _via_gateway(gateway, session, message, wait=wait, key=key, sender=sender)
        finally:
            await gateway.aclose()
    async with running(root, scope={session.id}, grace=LOCAL_GRACE) as local:
        d = await local.delivery.deliver(Incoming(session, message, sender, key=key), wait=wait)
        return Sent(session.profile, d.result, "local")


def _port_open(host: str, port: int) -> bool:
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    try:
        with socket.create_connection((host, port), timeout=PROBE_CONNECT_SECONDS):
            return True
    except OSError:
        return False


async def _via_gateway(
    gateway: GatewayClient, session: SessionRow, message: str, *, wait: float | None, key: str, sender: str
) -> Sent:
    answer = await gateway.chat(
        session.profile,
        session.id,
        message,
        wait=FOLLOW_WAIT_SECONDS if wait is None else wait,
        idempotency_key=key,
        sender=sender,
    )
    body = answer.body
    run_id = str(body.get("run_id") or body.get("delivery_id") or "")
    to = f"{session.profile}/{session.id}"
    replayed = bool(body.get("replayed"))
    if answer.status == 200:
        content = (body.get("message") or {}).get("content")
        result = Result(
            Outcome.DELIVERED,
            to,
            run_id=run_id,
            session_id=session.id,
            state="completed",
            reply=content,
            replayed=replayed,
            idempotency_key=key,
        )
        return Sent(session.profile, result, "gateway")
    if wait is None:  # the person waits for the end: follow the run
        result = await follow_run(gateway, session, run_id, wait=None, replayed=replayed, key=key)
        return Sent(session.profile, result, "gateway")
    receipt = Result(
        Outcome.RECEIPT,
        to,
        run_id=run_id,
        session_id=session.id,
        state=str(body.get("status", "queued")),
        queue_position=body.get("queue_position"),
        replayed=replayed,
        idempotency_key=key,
    )
    return Sent(session.profile, receipt, "gateway")


async def follow_run(
    gateway: GatewayClient, session: SessionRow, run_id: str, *, wait: float | None, replayed: bool, key: str | None
) -> Result:
    """A run of the gateway's, read until it ends or `wait` seconds have passed (None: until it ends)."""
    to = f"{session.profile}/{session.id}"
    path = f"/p/{urllib.parse.quote(session.profile, safe='')}/v1/runs/{urllib.parse.quote(run_id, safe='')}"
    deadline = None if wait is None else time.monotonic() + wait
    while True:
        run = (await gateway.request("GET", path)).body
        if run.get("status") not in ("queued", "running") or (deadline is not None and time.monotonic() >= deadline):
            return of_run(to, run, replayed=replayed, key=key)
        await asyncio.sleep(POLL_SECONDS)


def of_run(to: str, run: dict[str, Any], *, replayed: bool, key: str | None) -> Result:
    """A run as the gateway's /v1/runs route shows it, as an outcome."""
    state = str(run.get("status"))
    outcome = of_state(state)
    return Result(
        outcome,
        to,
        run_id=str(run.get("run_id")),
        session_id=run.get("session_id"),
        state=state,
        reply=run.get("output"),
        queue_position=run.get("queue_position"),
        code=run.get("code") if outcome is Outcome.FAILED else None,
        error=run.get("error") if outcome is Outcome.FAILED else None,
        replayed=replayed,
        idempotency_key=key,
    )
