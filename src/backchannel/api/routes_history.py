"""The home's runs as the person reads them (the person's key only): the runs, filtered; one run's whole record;
the run a message was filed under, by its idempotency key."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import dialect
from ..errors import UsageError
from ..states import RunState
from .context import context
from .http import int_param, run_scope
from .routes_directory import scope_of, session_at

STATES = {s.value: s for s in RunState}


async def list_runs(request: Request) -> Response:
    """`GET /v1/runs[?state=…&address=…&limit=…]`: newest first, each with its outcome so far; `state` repeats;
    `address`: a profile (its runs) or a session of the home (profile/session-id or a session id)."""
    ctx = context(request)
    profile, session_id = scope_of(request, ctx.roster), None
    address = request.query_params.get("address")
    if address is not None and address in ctx.roster.profiles() and profile in (None, address):
        profile = address
    elif address is not None:
        session = await session_at(ctx.roster, address, scope=profile)  # a profile alone is checked
        profile, session_id = session.profile, session.id
    wanted = request.query_params.getlist("state")
    if unknown := [s for s in wanted if s not in STATES]:
        raise UsageError(f"no run state {unknown[0]!r}: choose among {', '.join(STATES)}")
    found = await ctx.messages.runs(
        states=tuple(STATES[s] for s in wanted),
        profile=profile,
        session_id=session_id,
        limit=int_param(request, "limit", 50, low=1, high=10_000),
    )
    body: dialect.RunRecords = {"object": "list", "data": [dialect.run_record(d.run, d.result) for d in found]}
    return JSONResponse(body)


async def run_record(request: Request) -> Response:
    """`GET /v1/runs/{run_id}/record`: the run as `backchannel runs show --json` prints it; `run_id` may be the start
    of one run's id, as a table shows it (`run_d212…`)."""
    ctx = context(request)
    d = await ctx.messages.find_run(request.path_params["run_id"], profile=run_scope(request, ctx.roster))
    return JSONResponse(dialect.run_record(d.run, d.result))


async def message_run(request: Request) -> Response:
    """`GET /v1/messages?key=…`: the run a message sent with that idempotency key was filed under (a run here, or
    a peer's run as the peer told it), null when none is known yet."""
    key = request.query_params.get("key")
    if not key:
        raise UsageError("missing query parameter 'key' (the message's idempotency key)")
    body: dialect.MessageRun = {
        "object": "backchannel.message",
        "idempotency_key": key,
        "run_id": await context(request).messages.run_id_of(key),
    }
    return JSONResponse(body)
