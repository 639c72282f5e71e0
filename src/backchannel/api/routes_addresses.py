"""A local address resolved to its session (the person's key only): what `backchannel send` asks a running
gateway, so the command opens neither the store nor the config models itself.

`POST /v1/addresses/resolve` `{"address": …}` → `{"object": "backchannel.address", "address", "profile",
"session_id", "session"}`. The address is any local form of the grammar: a profile (its Bot Chat, made on first
use and saved before the answer), `profile/session-id`, or a session id (a Hermes session id not seen yet is
imported from the hermes profile that knows it). A peer's or a group's address is a 400: those are sent to,
not resolved here. Under `/p/{profile}/` the route is the same: the address names its own profile.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..addresses import LocalAddress, parse
from ..errors import UsageError
from . import shapes
from .context import context
from .http import json_body, optional_str, profile_of


async def resolve_address(request: Request) -> Response:
    ctx = context(request)
    # Under /p/{profile}: a profile of the home, as every route checks (the address names its own profile).
    ctx.directory.check_profile(profile_of(request))
    body = await json_body(request, ctx.settings.max_body_bytes, timeout=ctx.settings.body_timeout_seconds)
    text = optional_str(body, "address")
    if text is None:
        raise UsageError("missing field 'address'", code="invalid_address")
    address = parse(text)
    if not isinstance(address, LocalAddress):
        raise UsageError(f"{text!r} is a peer address: only a session of this home is resolved", code="invalid_address")
    session = await ctx.gateway.imports.resolve(address)
    return JSONResponse(
        {
            "object": "backchannel.address",
            "address": text,
            "profile": session.profile,
            "session_id": session.id,
            "session": shapes.session(session),
        }
    )
