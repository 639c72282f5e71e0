"""The keys of peers and agents (the person's key only): make, list, rotate, revoke; an agent key for a Hermes home.

A key's value is answered once, when it is made or given a new value, and kept nowhere (only its hash is in the
store); those answers are marked not to be stored by any cache on the way."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..errors import UsageError
from ..records import PeerKey
from .context import context
from .http import flag, json_body, optional_str, str_list

NOT_KEPT = {"Cache-Control": "no-store"}


def _with_value(k: PeerKey, value: str, status: int = 200) -> Response:
    return JSONResponse({**k.to_dict(), "key": value}, status_code=status, headers=NOT_KEPT)


async def list_keys(request: Request) -> Response:
    found = await context(request).gateway.keys.keys()
    return JSONResponse({"object": "list", "data": [k.to_dict() for k in found]})


async def create_key(request: Request) -> Response:
    ctx = context(request)
    body = await json_body(request, ctx.settings.max_body_bytes)
    name = optional_str(body, "name")
    if not name:
        raise UsageError("missing field 'name'")
    profiles = tuple(str_list(body, "profiles"))
    made, value = await ctx.gateway.keys.create(
        name, profiles=profiles, read=flag(body, "read"), metrics=flag(body, "metrics")
    )
    return _with_value(made, value, 201)


async def rotate_key(request: Request) -> Response:
    rotated, value = await context(request).gateway.keys.rotate(request.path_params["name"])
    return _with_value(rotated, value)


async def revoke_key(request: Request) -> Response:
    gone = await context(request).gateway.keys.revoke(request.path_params["name"])
    return JSONResponse(gone.to_dict())


async def agent_key(request: Request) -> Response:
    """The agent key of a profile for a Hermes home: the one its .env holds (`held`) while in force, else anew."""
    ctx = context(request)
    body = await json_body(request, ctx.settings.max_body_bytes)
    profile, home = optional_str(body, "profile"), optional_str(body, "hermes_home")
    if not profile or not home:
        raise UsageError("missing field 'profile' or 'hermes_home'")
    key, value, how = await ctx.gateway.keys.for_agent(
        profile, hermes_home=home, held=optional_str(body, "held"), rotate=flag(body, "rotate")
    )
    return JSONResponse({**key.to_dict(), "key": value, "how": how}, headers=NOT_KEPT)
