"""What the web view's pages follow live: the runs table, one reply as it streams, and whether a peer answers."""

from __future__ import annotations

import asyncio
import contextlib
import html
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response

from ...core.facades import Messages
from ...events import Chunk, Ended, Queued, Started, Step
from ..context import context
from ..lf_streams import event_stream
from .auth import WebSession
from .render import HEADERS, fragment, page
from .views import active_runs

RUNS_TICK_SECONDS = 0.3  # how often the runs table is looked at again (a change is sent, sameness is not)
REPLY_TICK_SECONDS = 1.0
PEER_TIMEOUT_SECONDS = 3.0
_SSE_HEADERS = {k: v for k, v in HEADERS.items() if k != "Cache-Control"}


async def _runs_table(delivery: Messages, session: WebSession) -> str:
    active, ended = await active_runs(delivery)
    return fragment("_runs.html", session=session, active=active, ended=ended)


async def runs_live(request: Request, session: WebSession) -> Response:
    """The runs table as server-sent events: sent again whenever a run is queued, starts, moves up or ends."""
    delivery = context(request).messages

    async def frames() -> AsyncIterator[dict[str, str]]:
        last = None
        while True:
            table = await _runs_table(delivery, session)
            if table != last:
                yield {"event": "runs", "data": table}
                last = table
            await asyncio.sleep(RUNS_TICK_SECONDS)

    return event_stream(frames(), headers=_SSE_HEADERS, sep="\r\n")


async def reply_stream(request: Request, session: WebSession) -> Response:
    """One run's reply as server-sent events: `state` as it changes, `delta` text as the engine writes it, `end`."""
    delivery = context(request).messages
    run = await delivery.run(request.path_params["run_id"])

    async def frames() -> AsyncIterator[dict[str, str]]:
        streamed = ""
        progress = delivery.watch(run.id, None, tick=REPLY_TICK_SECONDS)
        async with contextlib.aclosing(progress):
            async for step in progress:
                if isinstance(step, Queued):
                    if step.ahead:
                        yield {
                            "event": "state",
                            "data": f"queued behind {step.ahead} run{'s' if step.ahead != 1 else ''}",
                        }
                elif isinstance(step, Started):
                    yield {"event": "state", "data": "running"}
                elif isinstance(step, Chunk):
                    streamed += step.text
                    yield {"event": "delta", "data": html.escape(step.text)}
                elif isinstance(step, Step):
                    yield {"event": "state", "data": html.escape(f"running · {step.name[5:]} {step.tool}")}
                elif isinstance(step, Ended):
                    output = step.output or ""
                    if output.startswith(streamed) and len(output) > len(streamed):
                        yield {"event": "delta", "data": html.escape(output[len(streamed) :])}
                    yield {"event": "state", "data": step.state}
                    yield {"event": "end", "data": fragment("_reply_end.html", state=step.state, error=step.error)}

    return event_stream(frames(), headers=_SSE_HEADERS, sep="\r\n")


async def peer_status(request: Request, session: WebSession) -> Response:
    """Whether one peer answers just now, as a fragment the overview loads after it is shown."""
    answer = await context(request).messages.probe_peer(request.path_params["name"], timeout=PEER_TIMEOUT_SECONDS)
    return page(request, "_peer.html", session=session, answer=answer)
