"""Runs on a peer gateway, started, read, followed and stopped by the person (the person's key only), each kept in
this home's ledger as the outbound service keeps it (`core.delivery.outbound`).

`POST /v1/peers/{name}/runs` `{message, agent?}` (Idempotency-Key: the same run again); `GET …/runs/{run_id}`,
`POST …/runs/{run_id}/stop` (`?agent=`: the agent, for a run this home did not send), each answering the outcome
(`outcome`, as `Result.to_dict`) and what the peer said of the run (`run`, as it said it; null when it does not
know it); `GET …/runs/{run_id}/events`: the run's events on the peer until it ends. A failure once that stream
has begun is its last event, `stream.failed`, with the HTTP status and the error envelope it would have had.

`POST /v1/peers/{name}/probe` `{url, key, timeout_seconds?}`: what answers at a URL, asked before the peer is
added (`backchannel peer add`); nothing is saved.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..core.delivery.outbound import SentFrom
from ..errors import BackchannelError, NotFound, UsageError
from ..events import Other
from ..home import config
from ..home import peers as registry
from ..home.redact import redact
from ..outcome import Result, Run
from .context import Context, context
from .http import delivery_headers, json_body, optional_str, sender_of, text_field
from .lf_streams import event_stream


def _peer(request: Request) -> tuple[Context, registry.Peer, str | None]:
    ctx = context(request)
    agent = request.query_params.get("agent") or None
    return ctx, _known(ctx, request.path_params["name"]), agent


def _known(ctx: Context, name: str) -> registry.Peer:
    """The peer the path names: one not registered is not found (404), as anything a path names."""
    try:
        return ctx.messages.peer(name)
    except UsageError as exc:
        if exc.code != "unknown_peer":
            raise
        raise NotFound(exc.message, code=exc.code) from None


def _state(result: Result, found: Run | None) -> Response:
    return JSONResponse({"outcome": result.to_dict(), "run": dict(found.said) if found is not None else None})


async def start_run(request: Request) -> Response:
    ctx = context(request)
    body = await json_body(request, ctx.settings.max_body_bytes, timeout=ctx.settings.body_timeout_seconds)
    message = text_field(body, "message", "input", required=True) or ""
    peer = _known(ctx, request.path_params["name"])
    headers = delivery_headers(request)
    key = headers.key_or_new()
    sender = SentFrom(sender_of(request), deadline=headers.deadline)
    result, about = await ctx.messages.peer_run(peer, optional_str(body, "agent"), message, key=key, sender=sender)
    facts = {"platform": about.platform, "version": about.version, "durable_replay": about.durable_replay}
    return JSONResponse({"outcome": result.to_dict(), "about": facts}, status_code=202)


async def get_run(request: Request) -> Response:
    ctx, peer, agent = _peer(request)
    return _state(*await ctx.messages.peer_status(peer, request.path_params["run_id"], agent=agent))


async def stop_run(request: Request) -> Response:
    ctx, peer, agent = _peer(request)
    return _state(*await ctx.messages.stop_peer_run(peer, request.path_params["run_id"], agent=agent))


async def run_events(request: Request) -> Response:
    ctx, peer, agent = _peer(request)
    run_id = request.path_params["run_id"]

    async def frames() -> AsyncIterator[dict[str, Any]]:
        try:
            async for event in ctx.messages.follow_peer_run(peer, run_id, agent=agent):
                yield {"data": json.dumps(event.to_dict(), ensure_ascii=False)}
        except BackchannelError as exc:
            said = {"status": exc.http_status, **redact(exc, ctx.gateway.root).envelope()}
            yield {"data": json.dumps(Other(run_id, "stream.failed", said).to_dict(), ensure_ascii=False)}

    return event_stream(frames(), ping=30)


async def probe_peer(request: Request) -> Response:
    ctx = context(request)
    name = config.check_name(request.path_params["name"], what="peer")
    body = await json_body(request, ctx.settings.max_body_bytes)
    url, key, timeout = optional_str(body, "url"), optional_str(body, "key"), body.get("timeout_seconds")
    if not url or not key:
        raise UsageError("missing field 'url' or 'key'")
    if timeout is None:
        timeout = config.PEER_TIMEOUT_SECONDS
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
        raise UsageError("timeout_seconds must be a number of seconds above 0")
    peer = registry.Peer(name, registry.check_url(url), "", registry.check_key(name, key), timeout_seconds=timeout)
    return JSONResponse(dataclasses.asdict(await ctx.messages.examine(peer)))
