"""Run routes: start, read, follow (server-sent events), stop, and the ledger."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import cast

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import addresses, dialect
from ..core.delivery.delivery import WaitOver
from ..core.facades import Roster
from ..errors import KeyRevoked, UsageError
from ..events import Held, Other, Queued
from ..outcome import Outcome
from ..states import RunState
from .context import caller, context, incoming, stream_slot
from .http import float_param, int_param, json_body, optional_str, profile_of, run_scope, text_field
from .lf_streams import event_stream

KEEPALIVE_SECONDS = 15.0  # a comment on a quiet stream of a run's events
LEDGER_STATES = (*(s.value for s in RunState), "refused")
LEDGER_MOST = 100_000  # the most entries one read answers (what a run's totals add up)
OUTCOME_SCAN = 10_000  # entries read before they are filtered by outcome (an outcome spans several states)


async def start_run(request: Request) -> Response:
    ctx = context(request)
    profile = ctx.roster.check_profile(profile_of(request))
    body = await json_body(request, ctx.settings.max_body_bytes, timeout=ctx.settings.body_timeout_seconds)
    message = text_field(body, "input", "message", required=True)
    session_id = optional_str(body, "session_id")
    if session_id:
        session = caller(request).require_bot_chat(await ctx.roster.session(session_id, profile=profile))
    else:
        session = await ctx.roster.bot_chat(profile)
    message_in, _headers = incoming(request, ctx, session, body, message)
    d = await ctx.messages.submit(message_in)
    body_out = {
        "run_id": d.run.id,
        "status": d.run.state.value,
        "replayed": d.result.replayed,
        "session_id": session.id,
        "queue_position": d.result.queue_position,
    }
    extra = {"Idempotency-Replayed": "true"} if d.result.replayed else {}
    return JSONResponse(body_out, status_code=202, headers=extra)


async def get_run(request: Request) -> Response:
    ctx = context(request)
    d = await ctx.messages.status(request.path_params["run_id"], profile=run_scope(request, ctx.roster))
    caller(request).require_run(d.run)
    shown = dialect.run_of(d.run, d.result.queue_position)
    if d.run.state is RunState.INPUT_REQUIRED:  # what it waits for: its sender answers at …/answer
        question = await ctx.messages.asked(d.run.id)
        if question is not None and question.is_open:
            shown["question"] = cast(dialect.Question, question.to_dict())
    return JSONResponse(shown)


async def stop_run(request: Request) -> Response:
    ctx = context(request)
    run_id = request.path_params["run_id"]
    caller(request).require_run(await ctx.messages.run(run_id, profile=run_scope(request, ctx.roster)), stopping=True)
    d = await ctx.messages.stop(run_id, profile=run_scope(request, ctx.roster))
    return JSONResponse(dialect.run_of(d.run, None))


async def steer_run(request: Request) -> Response:
    """Hermes's steer (0.21): `{input | message | text}` into that run's running turn, from its own sender only."""
    ctx = context(request)
    scope = run_scope(request, ctx.roster)
    run = caller(request).require_run(
        await ctx.messages.run(request.path_params["run_id"], profile=scope), stopping=True
    )
    body = await json_body(request, ctx.settings.max_body_bytes, timeout=ctx.settings.body_timeout_seconds)
    text = text_field(body, "input", "message", "text")
    if text is None or not text.strip():
        raise UsageError("missing non-empty steer text: send 'input', 'message' or 'text'", code="invalid_steer_input")
    session = await ctx.roster.session(run.session_id, profile=run.profile)
    message_in, _headers = incoming(request, ctx, session, body, text)
    d = await ctx.messages.steer(run.id, message_in, profile=scope)
    return JSONResponse(
        {
            "object": "hermes.run.steer",
            "run_id": run.id,
            "status": "running",  # the turn it joined (hermes-control-mcp reads a steer without a status as failed)
            "accepted": True,
            "steer_run_id": d.run.id,  # the message's own run: its reply is the turn's
            "landed": d.run.landed,
            "replayed": d.result.replayed,
        }
    )


async def run_events(request: Request) -> Response:
    ctx = context(request)
    run = await ctx.messages.run(request.path_params["run_id"], profile=run_scope(request, ctx.roster))
    caller(request).require_run(run)

    async def frames() -> AsyncIterator[dict[str, str]]:
        async for event in ctx.messages.watch(run.id, tick=KEEPALIVE_SECONDS):
            if event is None:
                yield {"comment": "keepalive"}
            elif not isinstance(event, Queued | Held | WaitOver):  # the watcher's looks at the queue: not sent here
                yield {"data": json.dumps(event.to_dict(), ensure_ascii=False)}

    async def while_valid() -> AsyncIterator[dict[str, str]]:
        """The events until the run's end, or until the key the stream was opened with is revoked: then a last
        `stream.closed` event that says why (the run goes on)."""
        try:
            async for f in ctx.gateway.keys.while_valid(caller(request), frames()):
                yield f
        except KeyRevoked as exc:
            closed = Other(run.id, "stream.closed", {"code": exc.code, "error": exc.message})
            yield {"data": json.dumps(closed.to_dict(), ensure_ascii=False)}

    with stream_slot(request, run.id) as slot:  # held until the stream's answer ends
        return slot.holding(event_stream(while_valid(), ping=30))


async def get_ledger(request: Request) -> Response:
    """Newest first: `address` (at most two), `state` and `outcome` (each repeats), `since` (a Unix time),
    `limit`."""
    ctx = context(request)
    profile = ctx.roster.check_profile(profile_of(request))
    who = caller(request)
    who.require_read("the ledger")
    # Under /p/<profile>, that profile's entries only; at the root, every profile's for the person.
    scope = profile if "profile" in request.path_params or not who.is_person else None
    given = request.query_params.getlist("address")
    if len(given) > 2:
        raise UsageError("at most two 'address' parameters")
    for address in given:
        await _names_something(ctx.roster, address)
    states = request.query_params.getlist("state")
    if unknown := [s for s in states if s not in LEDGER_STATES]:
        raise UsageError(f"no ledger state {unknown[0]!r}: choose among {', '.join(LEDGER_STATES)}")
    try:
        outcomes = frozenset(Outcome(o) for o in request.query_params.getlist("outcome"))
    except ValueError as exc:
        raise UsageError(f"{exc}: choose among {', '.join(o.value for o in Outcome)}") from None
    limit = int_param(request, "limit", 100, low=1, high=LEDGER_MOST)
    rows = await ctx.messages.ledger(
        *given,
        limit=OUTCOME_SCAN if outcomes else limit,
        since=float_param(request, "since"),
        profile=scope,
        states=tuple(states),
    )
    if outcomes:
        rows = [r for r in rows if r.outcome in outcomes]
    return JSONResponse({"object": "list", "data": [r.to_dict() for r in rows[:limit]]})


async def _names_something(directory: Roster, address: str) -> None:
    """A malformed address is a usage error, and so is one that names nothing here (as for a message); a person
    (`human:…`) and a peer are named as they are."""
    if address.startswith("human:"):
        return
    local = addresses.as_local(addresses.parse(address))
    if local is not None:
        await directory.find(local)
