"""Run routes: start, read, follow (server-sent events) and stop."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..core.events import TERMINAL_EVENTS
from ..errors import UsageError
from . import shapes
from .context import context, submit
from .http import int_param, json_body, optional_str, profile_of, text_field


async def start_run(request: Request) -> Response:
    ctx = context(request)
    profile = ctx.router.check_profile(profile_of(request))
    body = await json_body(request, ctx.settings.max_body_bytes)
    message = text_field(body, "input", "message", required=True)
    session_id = optional_str(body, "session_id")
    session = ctx.router.session(session_id, profile=profile) if session_id else ctx.router.bot_chat(profile)
    delivery, _headers = submit(request, ctx, session, body, message)
    body_out = {
        "run_id": delivery.run.id,
        "status": delivery.run.state.value,
        "replayed": delivery.replayed,
        "session_id": session.id,
        "queue_position": delivery.queue_position,
    }
    extra = {"Idempotency-Replayed": "true"} if delivery.replayed else {}
    return JSONResponse(body_out, status_code=202, headers=extra)


async def get_run(request: Request) -> Response:
    ctx = context(request)
    profile = ctx.router.check_profile(profile_of(request))
    run = ctx.router.run(request.path_params["run_id"], profile=profile)
    return JSONResponse(shapes.run(run, ctx.router.queue_position(run)))


async def stop_run(request: Request) -> Response:
    ctx = context(request)
    profile = ctx.router.check_profile(profile_of(request))
    run = await ctx.router.stop(request.path_params["run_id"], profile=profile)
    return JSONResponse(shapes.run(run, None))


async def run_events(request: Request) -> Response:
    ctx = context(request)
    profile = ctx.router.check_profile(profile_of(request))
    run = ctx.router.run(request.path_params["run_id"], profile=profile)
    hub = ctx.router.runtime.events

    async def frames() -> AsyncIterator[dict[str, str]]:
        if run.state.terminal and not hub.known(run.id):
            yield _data(shapes.terminal_event(run))
            return
        async for event in hub.follow(run.id):
            if event is None:  # quiet for a while: the run may have ended in another process
                current = ctx.router.run(run.id)
                if current.state.terminal:
                    yield _data(shapes.terminal_event(current))
                    return
                yield {"comment": "keepalive"}
                continue
            if str(event.get("event")) in TERMINAL_EVENTS:
                await ctx.router.db.durable()
            yield _data(event)

    return EventSourceResponse(frames(), ping=30)


async def get_ledger(request: Request) -> Response:
    ctx = context(request)
    ctx.router.check_profile(profile_of(request))
    given = request.query_params.getlist("address")
    if len(given) > 2:
        raise UsageError("at most two 'address' parameters")
    limit = int_param(request, "limit", 100, low=1, high=10_000)
    rows = ctx.router.ledger(*given, limit=limit)
    return JSONResponse({"object": "list", "data": [r.to_dict() for r in rows]})


def _data(event: dict[str, object]) -> dict[str, str]:
    return {"data": json.dumps(event, ensure_ascii=False)}
