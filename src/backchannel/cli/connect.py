"""How a CLI command reaches the agents: the running gateway when there is one, else the same gateway in-process.

`gateway_link` gives the one or the other behind one client (`link_http.HttpGateway`); the commands speak only to
that.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .. import addresses
from ..addresses import LocalAddress
from ..errors import BackchannelError, DeliveryError, Interrupted
from ..home import config
from ..home.runtime import listening
from ..net.http import with_query
from ..outcome import NOT_CONSUMED, Outcome, Result
from .link import Progress, Where

if TYPE_CHECKING:  # the core (and so every engine and SDK) loads only for a command that runs it in-process
    from ..net.local import GatewayClient
    from .link_http import HttpGateway

__all__ = ["Sent", "Where", "call", "deliver", "find_gateway", "gateway_link", "request"]

T = TypeVar("T")

PROBE_CONNECT_SECONDS = 0.3


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
            details: dict[str, object] = {"run_id": self.result.run_id, "state": self.result.state}
            unread = f" ({NOT_CONSUMED})" if self.result.unread else ""
            if "consumed" in (said := self.result.to_dict()):
                details["consumed"] = said["consumed"]
            raise DeliveryError(
                f"run {self.result.run_id} {self.result.state}: {self.result.error or 'no reply'}{unread}",
                code=self.result.code or "run_failed",
                details=details,
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
    """The run a message was filed under, as the home's gateway knows it (None when it cannot be asked)."""
    try:
        run_id = call("GET", with_query("/v1/messages", key=key), root=root).get("run_id")
    except BackchannelError:
        return None
    return run_id if isinstance(run_id, str) else None


async def request(
    method: str,
    path: str,
    json: dict[str, Any] | None = None,
    *,
    headers: dict[str, str] | None = None,
    timeout: float | None = None,
    root: Path | None = None,
) -> tuple[dict[str, Any], str]:
    """The gateway's answer to one request, and which answered (`gateway`, or `local`: none runs, this home's is
    opened in this process; what it queues waits for a gateway). `timeout`: seconds for an answer that takes
    longer than most (else the client's own bound)."""
    async with gateway_link(root or config.home(), works=False) as link:
        return (await link.client.request(method, path, json=json, headers=headers, timeout=timeout)).body, link.via


def call(
    method: str,
    path: str,
    json: dict[str, Any] | None = None,
    *,
    headers: dict[str, str] | None = None,
    timeout: float | None = None,
    root: Path | None = None,
) -> dict[str, Any]:
    """The gateway's answer to one request (`request`), in an event loop of this command's."""
    return asyncio.run(request(method, path, json, headers=headers, timeout=timeout, root=root))[0]


async def local_session(link: HttpGateway, text: str) -> Where:
    """The existing session a local address names (`profile/session-id`, a session id, or a profile alone: its
    Bot Chat), as a message's target; a peer's address is a usage error."""
    found = (await link.client.request("GET", with_query("/v1/sessions", address=text))).body["data"][0]
    return Where(found["profile"], found["id"])


async def find_gateway(root: Path) -> GatewayClient | None:
    """This home's running gateway, or None: where its runtime file says it listens (whatever port it was
    started on), once that port's `/health` names the instance the file records. The key is never sent to a
    port before that: whatever else listens there (the gateway stopped, another program took the port) gets
    nothing. A closed port is seen without loading the HTTP client; a gateway of another version is refused
    (restart it)."""
    found = listening(root)
    if found is None or not found.instance:
        return None  # no gateway of this home is running (or one too old to name its instance)
    key = config.read_env(root).get(config.API_KEY_VAR)
    if not key or not found.gateway_id or not _port_open(found.host, found.port):
        return None
    from ..net.local import GatewayClient

    client = GatewayClient.at(found.host, found.port, key)
    try:
        if await client.probe(found.instance):
            return client
    except BaseException:
        await client.aclose()
        raise
    await client.aclose()
    return None


@contextlib.asynccontextmanager
async def gateway_link(root: Path, *, works: bool = True, every: bool = False) -> AsyncIterator[HttpGateway]:
    """This home's gateway as the command speaks to it: the running one when there is one, else the same gateway
    in this process (`link_local.in_process_client`; `works`: started, to work the runs the command sends or
    follows, or with `every` all of the home's), through the same client."""
    from .link_http import HttpGateway

    client = await find_gateway(root)
    if client is not None:
        try:
            yield HttpGateway(client)
        finally:
            await client.aclose()
        return
    from .link_local import in_process_client

    async with in_process_client(root, works=works, every=every) as local:
        yield HttpGateway(local, via="local")


async def deliver(
    root: Path,
    to: Where | LocalAddress,
    message: str,
    *,
    wait: float | None,
    key: str,
    sender: str = "human:cli",
    steer: bool = False,
    progress: Progress | None = None,
    deadline: float | None = None,
) -> Sent:
    """Deliver as the person to a session of this home and wait up to `wait` seconds (None: until the run ends);
    with `progress`, shown as it goes. An address is resolved by the same gateway that delivers (a running one
    owns the store: a Bot Chat is made, a Hermes session imported there)."""
    async with gateway_link(root) as link:
        result = await link.send(
            to.address if isinstance(to, Where) else to,
            message,
            wait=wait,
            key=key,
            sender=sender,
            steer=steer,
            progress=progress,
            deadline=deadline,
        )
        assert isinstance(result, Result)  # a session answers with one outcome (a group's is `send group:NAME`)
        return Sent(addresses.head(result.to), result, link.via)


def _port_open(host: str, port: int) -> bool:
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    try:
        with socket.create_connection((host, port), timeout=PROBE_CONNECT_SECONDS):
            return True
    except OSError:
        return False
