"""This home's gateway as a CLI command speaks to it: through its own routes (`net.local`), its answers read by
`net.wire` (the gateway speaks the Hermes dialect, as a peer does); the running gateway over the network, or the
same gateway in this process through its app (`connect.gateway_link`). A message is one request
(`POST /v1/messages`), whatever its address: the gateway resolves it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Literal

from ..addresses import Target
from ..errors import GatewayError
from ..events import Event, event_of
from ..net import wire
from ..net.http import quote
from ..outcome import GroupResult, Result, Run, failed, of_run
from ..states import RunState
from .link import FOLLOW_WAIT_SECONDS, Progress

if TYPE_CHECKING:
    from ..net.local import GatewayClient

POLL_SECONDS = 0.25


class HttpGateway:
    """The home's gateway through its client: `via` says which (`gateway`: the running one; `local`: this
    process's, none running)."""

    def __init__(self, client: GatewayClient, via: Literal["gateway", "local"] = "gateway") -> None:
        self.client = client
        self.via = via

    async def send(
        self,
        to: Target,
        message: str,
        *,
        wait: float | None,
        key: str,
        sender: str = "human:cli",
        progress: Progress | None = None,
        steer: bool = False,
        deadline: float | None = None,
    ) -> Result | GroupResult:
        """Deliver as the person to any address (a profile: its Bot Chat, made on first use; a peer's agent; each
        member of a group) and wait up to `wait` seconds (None: until the run ends); with `progress`, show a
        session's run as it goes; with `steer`, into the session's running turn (when it can take it)."""
        asked = FOLLOW_WAIT_SECONDS if wait is None else wait
        if progress is not None:
            return await self._live(
                to, message, wait=wait, key=key, sender=sender, progress=progress, steer=steer, deadline=deadline
            )
        sent = await self.client.send(
            str(to), message, wait=asked, key=key, sender=sender, steer=steer, deadline=deadline
        )
        body = sent.body
        if "results" in body:
            return wire.group_result(body)
        result = wire.result_of(body, to=wire.text(body.get("to")) or str(to))
        if wait is None and not result.outcome.settled and result.run_id:  # the person waits for the end
            return await self._follow(result.to, result.run_id, wait=None, replayed=result.replayed, key=key)
        return result

    async def _live(
        self,
        to: Target,
        message: str,
        *,
        wait: float | None,
        key: str,
        sender: str,
        progress: Progress,
        steer: bool = False,
        deadline: float | None = None,
    ) -> Result:
        """The message over a stream: its run's events shown as they come, its outcome at the end."""
        run_id, replayed, where, session_id = "", False, str(to), None
        asked = FOLLOW_WAIT_SECONDS if wait is None else wait
        stream = self.client.send_stream(
            str(to), message, wait=asked, key=key, sender=sender, steer=steer, deadline=deadline
        )
        async with contextlib.aclosing(stream):
            async for event in stream:
                data, name = event.json_object(), event.event
                if data is None:
                    continue
                if name == "run.started":
                    run_id, replayed = str(data.get("run_id") or ""), bool(data.get("replayed"))
                    session_id = wire.text(data.get("session_id"))
                    where = f"{data.get('profile')}/{session_id}" if data.get("profile") and session_id else where
                elif name == "run.waiting":
                    progress.waiting(int(data.get("runs_ahead") or 0), where)
                elif name == "assistant.delta":
                    progress.delta(str(data.get("delta") or ""))
                elif name == "assistant.completed":
                    run = Run(
                        RunState.COMPLETED, run_id=run_id, session_id=session_id, output=str(data.get("content") or "")
                    )
                    return of_run(where, run, replayed=replayed, key=key)
                elif name == "error" and run_id:
                    state = str(data.get("status") or "failed")
                    return failed(
                        where,
                        wire.text(data.get("code")) or f"run_{state}",
                        str(data.get("message") or state),
                        run_id=run_id,
                        session_id=session_id,
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

    async def _follow(self, to: str, run_id: str, *, wait: float | None, replayed: bool, key: str) -> Result:
        """A run read until it ends or `wait` seconds have passed (None: until it ends)."""
        path = f"/v1/runs/{quote(run_id)}"
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            run = wire.run_of((await self.client.request("GET", path)).body)
            if run.state not in (RunState.QUEUED, RunState.RUNNING) or (
                deadline is not None and time.monotonic() >= deadline
            ):
                return of_run(to, run, replayed=replayed, key=key)
            await asyncio.sleep(POLL_SECONDS)

    async def run(self, run_id: str) -> Result:
        """A run's outcome as it stands."""
        return wire.gateway_run((await self.client.request("GET", f"/v1/runs/{quote(run_id)}")).body)

    async def stop(self, run_id: str) -> Result:
        """Cancel a queued or held run, or interrupt its turn; what it became."""
        return wire.gateway_run((await self.client.request("POST", f"/v1/runs/{quote(run_id)}/stop")).body)

    async def events(self, run_id: str) -> AsyncIterator[Event]:
        """A run's events, past and future, until it ends."""
        async for data in self.client.events(run_id):
            event = event_of(data)
            yield event
            if event.ends:
                return
