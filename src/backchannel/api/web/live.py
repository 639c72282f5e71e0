"""What the web view's pages follow live: the runs table, one reply as it streams, and whether a peer answers."""

from __future__ import annotations

import asyncio
import html
from collections.abc import AsyncIterator

from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response

from ...core.delivery.delivery import Delivery
from ..context import context
from .auth import WebSession
from .render import HEADERS, fragment, page
from .views import active_runs

RUNS_TICK_SECONDS = 0.3  # how often the runs table is looked at again (a change is sent, sameness is not)
REPLY_TICK_SECONDS = 1.0
PEER_TIMEOUT_SECONDS = 3.0
_SSE_HEADERS = {k: v for k, v in HEADERS.items() if k != "Cache-Control"}


def _runs_table(delivery: Delivery, session: WebSession) -> str:
    active, ended = active_runs(delivery)
    return fragment("_runs.html", session=session, active=active, ended=ended)


async def runs_live(request: Request, session: WebSession) -> Response:
    """The runs table as server-sent events: sent again whenever a run is queued, starts, moves up or ends."""
    delivery = context(request).delivery

    async def frames() -> AsyncIterator[dict[str, str]]:
        last = None
        while True:
            table = _runs_table(delivery, session)
            if table != last:
                yield {"event": "runs", "data": table}
                last = table
            await asyncio.sleep(RUNS_TICK_SECONDS)

    return EventSourceResponse(frames(), ping=15, headers=_SSE_HEADERS)


async def reply_stream(request: Request, session: WebSession) -> Response:
    """One run's reply as server-sent events: `state` as it changes, `delta` text as the engine writes it, `end`."""
    delivery = context(request).delivery
    run = delivery.run(request.path_params["run_id"])

    async def frames() -> AsyncIterator[dict[str, str]]:
        streamed = ""
        ahead = delivery.runs_ahead(run.id)
        if ahead:
            yield {"event": "state", "data": f"queued behind {ahead} run{'s' if ahead != 1 else ''}"}
        async for event in delivery.follow(run.id, keepalive=REPLY_TICK_SECONDS):
            if event is None:
                now_ahead = delivery.runs_ahead(run.id)
                if now_ahead and now_ahead != ahead:
                    yield {"event": "state", "data": f"queued behind {now_ahead} run{'s' if now_ahead != 1 else ''}"}
                ahead = now_ahead
                continue
            name = str(event.get("event"))
            if name == "run.started":
                yield {"event": "state", "data": "running"}
            elif name == "message.delta":
                streamed += str(event["delta"])
                yield {"event": "delta", "data": html.escape(str(event["delta"]))}
            elif name in ("tool.started", "tool.completed"):
                yield {"event": "state", "data": html.escape(f"running · {name[5:]} {event.get('tool')}")}
            elif name.startswith("run."):
                output = str(event.get("output") or "")
                if output.startswith(streamed) and len(output) > len(streamed):
                    yield {"event": "delta", "data": html.escape(output[len(streamed) :])}
                state = name[4:]
                yield {"event": "state", "data": state}
                yield {"event": "end", "data": fragment("_reply_end.html", state=state, error=event.get("error"))}
                return

    return EventSourceResponse(frames(), ping=15, headers=_SSE_HEADERS)


async def peer_status(request: Request, session: WebSession) -> Response:
    """Whether one peer answers just now, as a fragment the overview loads after it is shown."""
    answer = await context(request).delivery.probe_peer(request.path_params["name"], timeout=PEER_TIMEOUT_SECONDS)
    return page(request, "_peer.html", session=session, answer=answer)
