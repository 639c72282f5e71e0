"""Held messages (the person's key only): list, approve, deny. The web view and the CLI use these."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import dialect
from ..records import Run
from .context import context
from .http import json_body, optional_str


def _scope(request: Request) -> str | None:
    named = request.path_params.get("profile")
    return None if named is None else context(request).roster.check_profile(str(named))


def held_run(run: Run) -> dialect.HeldRun:
    return {
        **dialect.run_of(run, None),
        "sender": run.sender,
        "message": run.message,
        "expires_at": run.expires_at,
    }


async def list_held(request: Request) -> Response:
    rows = await context(request).gateway.admin.held(profile=_scope(request))
    return JSONResponse({"object": "list", "data": [held_run(r) for r in rows]})


async def approve(request: Request) -> Response:
    run = await context(request).gateway.admin.approve(request.path_params["run_id"], profile=_scope(request))
    return JSONResponse(held_run(run))


async def deny(request: Request) -> Response:
    ctx = context(request)
    body = await json_body(request, ctx.settings.max_body_bytes)
    why = optional_str(body, "why")
    run = await ctx.gateway.admin.deny(request.path_params["run_id"], why=why, profile=_scope(request))
    return JSONResponse(held_run(run))
