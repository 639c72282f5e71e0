"""The web view's pages: overview, a session, runs, one run, the ledger, one exchange, the held messages, the
questions and the rooms."""

from __future__ import annotations

import time
import uuid

from starlette.requests import Request
from starlette.responses import Response

from ... import __version__
from ...core.spending import totals
from ...errors import UsageError
from ...outcome import Outcome
from ...records import RunState
from ..context import context
from .auth import WebSession
from .render import page
from .timeline import timeline
from .views import LEDGER_OUTCOMES, WITHIN, active_runs, ledger_rows, session_items

SESSIONS_SHOWN = 8


async def overview(request: Request, session: WebSession) -> Response:
    ctx = context(request)
    profiles = []
    for name in ctx.roster.profiles():
        recent = await ctx.roster.sessions(name, limit=SESSIONS_SHOWN + 1)
        profiles.append(
            {
                "name": name,
                "engine": ctx.roster.profile(name).config.model.engine,
                "sessions": recent[:SESSIONS_SHOWN],
                "more": len(recent) > SESSIONS_SHOWN,
                "last_active": max((s.updated_at for s in recent), default=None),
            }
        )
    load = await ctx.messages.load()
    admin = ctx.gateway.admin
    return page(
        request,
        "overview.html",
        session=session,
        gateway_id=ctx.settings.gateway_id or "local",
        version=__version__,
        queued=load[RunState.QUEUED],
        running=load[RunState.RUNNING],
        profiles=profiles,
        peers=ctx.roster.peers(),
        held=len(await admin.held()),
        questions=len(await admin.questions()),
        rooms=await admin.rooms(),
    )


async def session_page(request: Request, session: WebSession) -> Response:
    ctx = context(request)
    row = await ctx.roster.session(request.path_params["session_id"])
    items = await session_items(await ctx.roster.messages(row.id), ctx.messages)
    return page(request, "session.html", session=session, row=row, items=items, send_key=new_send_key())


def new_send_key() -> str:
    """The idempotency key of the next message a session page sends: a form sent twice is one run."""
    return f"web-{uuid.uuid4().hex}"


async def runs_page(request: Request, session: WebSession) -> Response:
    active, ended = await active_runs(context(request).messages)
    return page(request, "runs.html", session=session, active=active, ended=ended)


async def run_page(request: Request, session: WebSession) -> Response:
    ctx = context(request)
    d = await ctx.messages.status(request.path_params["run_id"])
    return page(request, "run.html", session=session, d=d, run=d.run)


async def ledger_page(request: Request, session: WebSession) -> Response:
    ctx = context(request)
    query = request.query_params
    addresses = [a.strip() for a in query.getlist("address") if a.strip()]
    if len(addresses) > 2:
        raise UsageError("the ledger filters by one address or a pair, not more")
    outcome = query.get("outcome") or query.get("state") or ""  # `state`: the name of this filter in older links
    outcomes = {o.value: o for o in LEDGER_OUTCOMES}
    if outcome and outcome not in outcomes:
        raise UsageError(f"no ledger outcome {outcome!r}: choose one of {', '.join(outcomes)}")
    within = query.get("within") or ""
    if within and within not in WITHIN:
        raise UsageError(f"no time range {within!r}: choose one of {', '.join(WITHIN)}")
    since = time.time() - WITHIN[within] if within else None
    rows, more = await ledger_rows(ctx.messages, addresses, outcomes.get(outcome), since)
    _, pairs = totals(rows)
    spending = [(day, a, b, t) for (day, a, b), t in pairs.items() if t.tokens_in or t.tokens_out]
    return page(
        request,
        "ledger.html",
        session=session,
        rows=rows,
        more=more,
        spending=spending,
        addresses=addresses + [""] * (2 - len(addresses)),
        outcome=outcome,
        within=within,
        outcomes=[o.value for o in LEDGER_OUTCOMES],
        ranges=list(WITHIN),
        profiles=ctx.roster.profiles(),
    )


async def exchange_page(request: Request, session: WebSession) -> Response:
    ctx = context(request)
    run = await ctx.messages.run(request.path_params["run_id"])
    entries = await ctx.messages.exchange(run.id)
    pair = [a.strip() for a in request.query_params.getlist("address") if a.strip()][:2]
    return page(
        request,
        "exchange.html",
        session=session,
        origin=run.origin or run.id,
        entries=entries,
        t=timeline(entries, now=time.time()),
        pair=pair,
        focus=run.id,
        delivered=Outcome.DELIVERED,
    )


async def rooms_page(request: Request, session: WebSession) -> Response:
    """The home's rooms, each with its members."""
    return page(request, "rooms.html", session=session, rooms=await context(request).gateway.admin.rooms())


async def room_page(request: Request, session: WebSession) -> Response:
    """One room: its transcript in order (each answer's state), a box to say something, new lines as they come."""
    admin = context(request).gateway.admin
    name = request.path_params["name"]
    room = await admin.room(name)
    return page(request, "room.html", session=session, room=room, lines=await admin.transcript(name))


async def room_lines(request: Request, session: WebSession) -> Response:
    """The transcript's lines as the room page shows them (htmx asks for them again every second)."""
    admin = context(request).gateway.admin
    name = request.path_params["name"]
    room = await admin.room(name)
    return page(request, "_room_lines.html", session=session, room=room, lines=await admin.transcript(name))


async def questions_page(request: Request, session: WebSession) -> Response:
    """The questions agents asked their person, open ones first to answer or decline; the last ones closed below."""
    admin = context(request).gateway.admin
    closed = [q for q in await admin.questions(state=None, limit=50) if not q.is_open][:20]
    return page(request, "questions.html", session=session, open=await admin.questions(), closed=closed)


async def held_page(request: Request, session: WebSession) -> Response:
    """The messages waiting for the person's approval, oldest first, each with who sent it and when it expires."""
    held = await context(request).gateway.admin.held()
    return page(request, "held.html", session=session, held=held)
