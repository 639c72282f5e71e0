"""The Hermes plugin's work: the turns handed to its gateway's chat pipeline (`GET …/v1/handoffs`, a long poll)
and what became of each (`POST …/v1/handoffs/{run_id}`). The profile's agent key, or the person's."""

from __future__ import annotations

import re
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..core.handoffs import REPORTED, Handoff, State
from ..errors import Conflict, NotFound, UsageError
from .context import context
from .http import json_body, profile_of

TAKER_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
MAX_TEXT = 1_000_000  # characters of a reply, an error or a detail the plugin hands back


def shape(handoff: Handoff) -> dict[str, Any]:
    return {
        "object": "backchannel.handoff",
        "run_id": handoff.run_id,
        "remote_session": handoff.remote_session,
        "message": handoff.message,
        "state": handoff.state,
    }


async def take_handoffs(request: Request) -> Response:
    """The profile's handoffs for the asking plugin (`taker`: its own id), waiting up to `wait` seconds for one."""
    ctx = context(request)
    profile = ctx.roster.check_profile(profile_of(request))
    taker = request.query_params.get("taker", "")
    if not TAKER_RE.match(taker):
        raise UsageError("query parameter 'taker' must be 1-128 letters, digits, '_', '.', ':' or '-'")
    try:
        wait = float(request.query_params.get("wait", "0"))
    except ValueError:
        raise UsageError("query parameter 'wait' must be a number of seconds") from None
    found = await ctx.gateway.hosting.take(profile, taker=taker, wait=wait)
    return JSONResponse({"object": "list", "data": [shape(h) for h in found]})


async def settle_handoff(request: Request) -> Response:
    """What became of one handoff: `state` waiting or running (its progress), answered (`reply`), failed
    (`error`) or not_a_chat (no chat drives that session)."""
    ctx = context(request)
    profile = ctx.roster.check_profile(profile_of(request))
    run_id = request.path_params["run_id"]
    if await ctx.gateway.hosting.handoff(profile, run_id) is None:
        raise NotFound(f"no handoff of run {run_id!r} in profile {profile!r}", code="handoff_not_found")
    body = await json_body(request, ctx.settings.max_body_bytes)
    state = body.get("state")
    if state not in REPORTED:
        raise UsageError(f"field 'state' must be one of {', '.join(sorted(REPORTED))}")
    texts: dict[str, str | None] = {}
    for field in ("reply", "error", "detail"):
        value = body.get(field)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_TEXT):
            raise UsageError(f"field {field!r} must be a string of at most {MAX_TEXT:,} characters")
        texts[field] = value
    done = await ctx.gateway.hosting.settle(profile, run_id, cast(State, state), **texts)
    if done is None:
        raise NotFound(f"no handoff of run {run_id!r} in profile {profile!r}", code="handoff_not_found")
    if done.state == "withdrawn":
        raise Conflict(
            f"run {run_id!r} was stopped and its handoff withdrawn: do not hand it to Hermes", code="handoff_withdrawn"
        )
    return JSONResponse(shape(done))
