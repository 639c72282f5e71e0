"""The home's rooms over HTTP (the person's key only): make one, change its members, list them, read one's
transcript, say something in one, follow the round it opened.

`GET /v1/rooms`, `GET /v1/rooms/{name}` (`?after=SEQ`: only the lines after that one, to follow a room by
polling), and `POST /v1/rooms/{name}/messages` `{"message": …}`: the person's line and the round it opens
(202: the gateway asks the members in turn; read their answers with `GET /v1/rooms/{name}?after=…`, or the
round's alone, and whether it is done, with `GET /v1/rooms/{name}/rounds/{round}`).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..errors import NotFound, UsageError
from ..transcript import Room
from .context import context
from .http import json_body, optional_str, profile_of, sender_of, str_list, text_field


def _room(room: Room) -> dict[str, Any]:
    return {"name": room.name, "members": list(room.members), "created_at": room.created_at}


def _checked(request: Request) -> None:
    """Under /p/<profile>, a profile of this home (the rooms are the home's, whichever profile's path)."""
    context(request).roster.check_profile(profile_of(request))


async def list_rooms(request: Request) -> Response:
    _checked(request)
    rooms = await context(request).gateway.admin.rooms()
    return JSONResponse({"rooms": [_room(r) for r in rooms]})


async def get_room(request: Request) -> Response:
    _checked(request)
    admin = context(request).gateway.admin
    name = request.path_params["name"]
    raw = request.query_params.get("after", "0")
    if not raw.isdigit() or len(raw) > 18:
        raise UsageError(f"after must be a line number (0 or more), got {raw[:40]!r}")
    found = await admin.room(name)
    lines = await admin.transcript(name, after=int(raw))
    return JSONResponse({**_room(found), "lines": [line.to_dict() for line in lines]})


async def say_in_room(request: Request) -> Response:
    _checked(request)
    ctx = context(request)
    body = await json_body(request, ctx.settings.max_body_bytes, timeout=ctx.settings.body_timeout_seconds)
    message = text_field(body, "message", "input", required=True)
    name = request.path_params["name"]
    line, opened = await ctx.gateway.admin.say_in_room(name, message or "", sender=sender_of(request))
    waiting = [w.member for w in opened.waiting]
    return JSONResponse(
        {"room": opened.room, "round": opened.id, "line": line.to_dict(), "waiting": waiting}, status_code=202
    )


async def create_room(request: Request) -> Response:
    _checked(request)
    ctx = context(request)
    body = await json_body(request, ctx.settings.max_body_bytes)
    name = optional_str(body, "name")
    if not name:
        raise UsageError("missing field 'name'")
    return JSONResponse(_room(await ctx.gateway.admin.create_room(name, str_list(body, "members"))), status_code=201)


async def add_members(request: Request) -> Response:
    return await _members(request, remove=False)


async def remove_members(request: Request) -> Response:
    return await _members(request, remove=True)


async def _members(request: Request, *, remove: bool) -> Response:
    _checked(request)
    ctx = context(request)
    members = str_list(await json_body(request, ctx.settings.max_body_bytes), "members")
    if not members:
        raise UsageError("no members: give 'members', a list of addresses")
    admin, name = ctx.gateway.admin, request.path_params["name"]
    changed = await (admin.remove_members if remove else admin.add_members)(name, members)
    return JSONResponse(_room(changed))


async def get_round(request: Request) -> Response:
    """A round the person's message opened: done or open, and its lines (the members' answers so far)."""
    _checked(request)
    admin = context(request).gateway.admin
    name, round_id = request.path_params["name"], request.path_params["round"]
    await admin.room(name)  # an unknown room is told as such
    found = await admin.round(round_id)
    if found.room != name:
        raise NotFound(f"room {name!r} has no round {round_id!r}", code="round_not_found")
    lines = [line for line in await admin.transcript(name, after=found.line) if line.round == found.id]
    return JSONResponse({"room": name, "round": found.id, "state": found.state, "lines": [x.to_dict() for x in lines]})
