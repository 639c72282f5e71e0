"""A person's message answered live: the reply shown as the engine produces it and, while its run waits in
the session's queue, behind how many runs. The running gateway's `/chat/stream`, else the same in-process."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..core.delivery.delivery import Delivery, Incoming
from ..core.gateway import running
from ..core.queue.events import TERMINAL_EVENTS
from ..errors import GatewayError, UsageError
from ..outcome import Outcome, Result
from ..store.sessions import SessionRow
from .connect import FOLLOW_WAIT_SECONDS, LOCAL_GRACE, Sent, find_gateway, follow_run
from .output import note

if TYPE_CHECKING:
    from ..net.local import GatewayClient

TICK_SECONDS = 1.0  # how often the in-process path looks again at the queue
STREAM_HELP = "Print the reply as it is produced (default: when stdout is a terminal)."


def streams(option: bool | None, *, as_json: bool) -> bool:
    """Whether to show the reply live: --stream/--no-stream, else when stdout is a terminal; never with --json."""
    if as_json:
        if option:
            raise UsageError("give --stream (text as it comes) or --json (one object at the end), not both")
        return False
    return sys.stdout.isatty() if option is None else option


class Watch:
    """What a live delivery shows as it goes: the reply's text on stdout, waits in the queue on stderr."""

    def __init__(self) -> None:
        self.shown = False  # some of this message's reply is on stdout already
        self._open = False  # ... and its line is not ended yet
        self._ahead: int | None = None

    def begin(self) -> None:
        self.shown = self._open = False
        self._ahead = None

    def delta(self, text: str) -> None:
        if text:
            click.echo(text, nl=False)
            sys.stdout.flush()
            self.shown = self._open = True

    def waiting(self, ahead: int, where: str) -> None:
        if ahead == self._ahead or (ahead == 0 and self._ahead is None):
            return  # every run is queued for a moment: only a real wait is worth a line
        runs = "run" if ahead == 1 else "runs"
        note(f"queued behind {ahead} {runs} in {where}" if ahead else f"next in {where}")
        self._ahead = ahead

    def end_line(self) -> None:
        """End the streamed reply's line (before a receipt, an error or the next prompt)."""
        if self._open:
            click.echo("")
            self._open = False


async def deliver_live(
    root: Path, session: SessionRow, message: str, *, wait: float | None, key: str, watch: Watch
) -> Sent:
    """Deliver as the person, showing the run as it goes; wait up to `wait` seconds (None: until it ends)."""
    watch.begin()
    gateway = await find_gateway(root)
    if gateway is not None:
        try:
            return Sent(session.profile, await _via_gateway(gateway, session, message, wait, key, watch), "gateway")
        finally:
            await gateway.aclose()
    async with running(root, scope={session.id}, grace=LOCAL_GRACE) as local:
        incoming = Incoming(session, message, "human:cli", key=key)
        return Sent(session.profile, await _in_process(local.delivery, incoming, wait, watch), "local")


async def _via_gateway(
    gateway: GatewayClient, session: SessionRow, message: str, wait: float | None, key: str, watch: Watch
) -> Result:
    to = f"{session.profile}/{session.id}"
    run_id, replayed = "", False
    stream = gateway.chat_stream(
        session.profile,
        session.id,
        message,
        wait=FOLLOW_WAIT_SECONDS if wait is None else wait,
        idempotency_key=key,
        sender="human:cli",
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
                watch.waiting(int(data.get("runs_ahead") or 0), to)
            elif name == "assistant.delta":
                watch.delta(str(data.get("delta") or ""))
            elif name == "assistant.completed":
                reply = str(data.get("content") or "")
                return Result(
                    Outcome.DELIVERED,
                    to,
                    run_id=run_id,
                    session_id=session.id,
                    state="completed",
                    reply=reply,
                    replayed=replayed,
                    idempotency_key=key,
                )
            elif name == "error" and run_id:
                state = str(data.get("status") or "failed")
                return Result(
                    Outcome.FAILED,
                    to,
                    run_id=run_id,
                    session_id=session.id,
                    state=state,
                    reply=data.get("output"),
                    code=data.get("code") or f"run_{state}",
                    error=str(data.get("message") or state),
                    replayed=replayed,
                    idempotency_key=key,
                )
            elif name == "run.queued":
                break  # the stream's wait ran out with the run still queued or running
    if not run_id:
        raise GatewayError("the gateway's stream ended before it said whether it accepted the message")
    # Out of time on the stream, or it ended early: the run is durable, so its outcome is read from the gateway.
    return await follow_run(gateway, session, run_id, wait=None if wait is None else 0.0, replayed=replayed, key=key)


async def _in_process(delivery: Delivery, incoming: Incoming, wait: float | None, watch: Watch) -> Result:
    first = await delivery.submit(incoming)
    run_id = first.run.id
    to = first.result.to
    reserved = delivery.reserve_events(run_id)
    deadline = None if wait is None else time.monotonic() + wait
    ahead = delivery.runs_ahead(run_id)
    if ahead is not None:
        watch.waiting(ahead, to)
    events = delivery.follow(run_id, keepalive=TICK_SECONDS, reserved=reserved)
    async with contextlib.aclosing(events):
        async for event in events:
            if event is None:
                if ahead is not None:
                    ahead = delivery.runs_ahead(run_id)
                    if ahead is not None:
                        watch.waiting(ahead, to)
                if deadline is not None and time.monotonic() >= deadline:
                    break
                continue
            name = event.get("event")
            if name == "run.started":
                ahead = None
            elif name == "message.delta":
                watch.delta(str(event.get("delta") or ""))
            elif name in TERMINAL_EVENTS:
                break
    result = delivery.status(run_id).result
    return dataclasses.replace(result, replayed=first.result.replayed)
