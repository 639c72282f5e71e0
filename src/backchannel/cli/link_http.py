"""`GatewayLink` over HTTP: the running gateway of this home, through its own routes (`net.local`), its answers
read by `net.wire` (the gateway speaks the Hermes dialect, as a peer does)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..addresses import LocalAddress
from ..errors import GatewayError
from ..net import wire
from ..net.http import quote
from ..net.link import RunEvent
from ..outcome import GroupResult, Result, Run, failed, of_run
from ..states import TERMINAL_EVENTS
from .link import FOLLOW_WAIT_SECONDS, Progress, Where

if TYPE_CHECKING:
    from ..net.local import GatewayClient

POLL_SECONDS = 0.25


class HttpGateway:
    """The running gateway, reached at the port its runtime file names."""

    via: Literal["gateway", "local"] = "gateway"

    def __init__(self, client: GatewayClient, root: Path) -> None:
        self.client = client
        self.root = root

    async def resolve(self, address: LocalAddress) -> Where:
        """Asked of the gateway, which owns the store (a Bot Chat made, a Hermes session imported); a gateway of
        an earlier version, still running after an upgrade, has no such route: then resolved in-process."""
        if not self.client.features.get("address_resolve"):
            from .link_local import LocalGateway

            return await LocalGateway(self.root).resolve(address)
        body = (await self.client.resolve(str(address))).body
        profile, session_id = body.get("profile"), body.get("session_id")
        if not isinstance(profile, str) or not isinstance(session_id, str):
            raise GatewayError("the gateway answered the address with an unknown shape")
        return Where(profile, session_id)

    async def dm(self, peer: str, agent: str | None, message: str, *, wait: float, key: str) -> Result:
        """Sent by the gateway (it keeps the exchange in the ledger); by this process when the gateway is of an
        earlier version that does not send for the person."""
        if not self.client.features.get("peer_messages"):
            from .link_local import LocalGateway

            return await LocalGateway(self.root).dm(peer, agent, message, wait=wait, key=key)
        body = (await self.client.peer_message(peer, agent, message, wait=wait, key=key)).body
        return wire.result_of(body, to=wire.text(body.get("to")) or f"peer:{peer}")

    async def send_group(
        self, group: str, message: str, *, wait: float, key: str, sender: str = "human:cli"
    ) -> GroupResult:
        answer = await self.client.group(group, message, wait=wait, idempotency_key=key, sender=sender)
        return wire.group_result(answer.body)

    async def deliver(
        self,
        where: Where,
        message: str,
        *,
        wait: float | None,
        key: str,
        sender: str = "human:cli",
        progress: Progress | None = None,
        steer: bool = False,
    ) -> Result:
        if progress is not None:
            return await self._live(where, message, wait=wait, key=key, sender=sender, progress=progress, steer=steer)
        answer = await self.client.chat(
            where.profile,
            where.session_id,
            message,
            wait=FOLLOW_WAIT_SECONDS if wait is None else wait,
            idempotency_key=key,
            sender=sender,
            steer=steer,
        )
        result = wire.chat_result(answer.body, to=where.to, session_id=where.session_id, key=key)
        if result is None:
            raise GatewayError(f"the gateway answered the message with an unknown shape (HTTP {answer.status})")
        if wait is None and not result.outcome.settled and result.run_id:  # the person waits for the end
            return await self._follow(where, result.run_id, wait=None, replayed=result.replayed, key=key)
        return result

    async def _live(
        self,
        where: Where,
        message: str,
        *,
        wait: float | None,
        key: str,
        sender: str,
        progress: Progress,
        steer: bool = False,
    ) -> Result:
        """The message over `/chat/stream`: its run's events shown as they come, its outcome at the end."""
        run_id, replayed = "", False
        stream = self.client.chat_stream(
            where.profile,
            where.session_id,
            message,
            wait=FOLLOW_WAIT_SECONDS if wait is None else wait,
            idempotency_key=key,
            sender=sender,
            steer=steer,
        )
        async with contextlib.aclosing(stream):
            async for event in stream:
                try:
                    data = json.loads(event.data)
                except ValueError:
                    continue
                if not isinstance(data, dict):
                    continue
                name = event.event
                if name == "run.started":
                    run_id, replayed = str(data.get("run_id") or ""), bool(data.get("replayed"))
                elif name == "run.waiting":
                    progress.waiting(int(data.get("runs_ahead") or 0), where.to)
                elif name == "assistant.delta":
                    progress.delta(str(data.get("delta") or ""))
                elif name == "assistant.completed":
                    run = Run(
                        "completed", run_id=run_id, session_id=where.session_id, output=str(data.get("content") or "")
                    )
                    return of_run(where.to, run, replayed=replayed, key=key)
                elif name == "error" and run_id:
                    state = str(data.get("status") or "failed")
                    return failed(
                        where.to,
                        wire.text(data.get("code")) or f"run_{state}",
                        str(data.get("message") or state),
                        run_id=run_id,
                        session_id=where.session_id,
                        state=state,
                        reply=wire.text(data.get("output")),
                        replayed=replayed,
                        idempotency_key=key,
                    )
                elif name == "run.queued":
                    break  # the stream's wait ran out with the run still queued or running
        if not run_id:
            raise GatewayError("the gateway's stream ended before it said whether it accepted the message")
        # Out of time on the stream, or it ended early: the run is durable, so its outcome is read from the gateway.
        return await self._follow(where, run_id, wait=None if wait is None else 0.0, replayed=replayed, key=key)

    async def _follow(self, where: Where, run_id: str, *, wait: float | None, replayed: bool, key: str) -> Result:
        """A run read until it ends or `wait` seconds have passed (None: until it ends)."""
        path = f"/p/{quote(where.profile)}/v1/runs/{quote(run_id)}"
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            run = wire.run_of((await self.client.request("GET", path)).body)
            if run.state not in ("queued", "running") or (deadline is not None and time.monotonic() >= deadline):
                return of_run(where.to, run, replayed=replayed, key=key)
            await asyncio.sleep(POLL_SECONDS)

    async def run(self, run_id: str) -> Result:
        return wire.gateway_run((await self.client.request("GET", f"/v1/runs/{quote(run_id)}")).body)

    async def stop(self, run_id: str) -> Result:
        return wire.gateway_run((await self.client.request("POST", f"/v1/runs/{quote(run_id)}/stop")).body)

    async def events(self, run_id: str) -> AsyncIterator[RunEvent]:
        async for data in self.client.events(run_id):
            event = wire.event_of(data)
            yield event
            if event.name in TERMINAL_EVENTS:
                return
