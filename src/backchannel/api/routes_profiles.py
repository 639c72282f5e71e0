"""Removing a profile (the person's key only): `DELETE /v1/profiles/{name}` sets its folder aside and retitles its
Bot Chat, keeping its history; refused while it has runs queued or running or messages held for the person.
`?dry_run=true`: only whether it may be removed (nothing is changed)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..errors import UsageError
from ..home import profiles
from ..states import RunState
from .context import context

PENDING_SHOWN = 1000
HELD_NAMED = 5  # the held runs an error names


async def remove_profile(request: Request) -> Response:
    ctx = context(request)
    name = request.path_params["name"]
    pending = await ctx.messages.runs(states=(RunState.QUEUED, RunState.RUNNING), profile=name, limit=PENDING_SHOWN)
    if pending:
        raise UsageError(
            f"profile {name!r} has {len(pending)} run{'' if len(pending) == 1 else 's'} queued or running: stop "
            f"them first (backchannel runs list -p {name})"
        )
    held = await ctx.messages.runs(states=(RunState.HELD,), profile=name, limit=PENDING_SHOWN)
    if held:
        ids = ", ".join(d.run.id for d in held[:HELD_NAMED]) + (", …" if len(held) > HELD_NAMED else "")
        raise UsageError(
            f"profile {name!r} has {len(held)} held message{'' if len(held) == 1 else 's'} waiting for your approval "
            f"({ids}): approve or refuse {'it' if len(held) == 1 else 'each'} first (backchannel approve RUN, "
            f"backchannel deny RUN; backchannel held -p {name} lists them)"
        )
    dry_run = request.query_params.get("dry_run", "false")
    if dry_run not in ("true", "false"):
        raise UsageError(f"dry_run must be true or false, got {dry_run[:40]!r}")
    if dry_run == "true":
        return JSONResponse({"profile": name, "removed": False, "folder": None, "bot_chat": None})
    aside = profiles.remove_profile(ctx.gateway.root, name)
    old = await ctx.roster.retire_bot_chat(name, mark=aside.name.rpartition("removed-")[2])
    bot_chat = None if old is None else {"id": old.id, "title": old.title}
    return JSONResponse({"profile": name, "removed": True, "folder": str(aside), "bot_chat": bot_chat})
