"""Stopping a home's running gateway gracefully, over its API with the home's key (Windows has no SIGTERM): what
`gateway stop` does, and what `gateway uninstall` does first."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import procs
from ..errors import GatewayError
from ..home import runtime
from .connect import find_gateway
from .output import note

POLL_SECONDS = 0.1
STOP_MARGIN_SECONDS = 15.0  # past twice the grace (open requests, then running turns), for closing the store


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


async def stop_gateway(root: Path) -> Stopped:
    """Ask the home's gateway to stop and wait until it is gone; `not_running` when none runs."""
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
