"""The home's sessions as the person reads them (the person's key only): across profiles or of one, the one an
address names, and a Hermes gateway's sessions made addressable here."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import addresses, dialect
from ..core.facades import Roster
from ..errors import NotFound, UsageError
from ..records import Session
from .context import context
from .http import int_param, profile_of


def scope_of(request: Request, directory: Roster) -> str | None:
    """The profile a read is kept to: the one named under /p/<profile>, none at the root."""
    return directory.check_profile(profile_of(request)) if "profile" in request.path_params else None


async def session_at(directory: Roster, text: str, *, scope: str | None = None) -> Session:
    """The existing session a local address names (a profile alone: its Bot Chat); a peer's address is a usage
    error, a session of a profile other than `scope` is not found."""
    parsed = addresses.as_local(addresses.parse(text))
    if parsed is None:
        raise UsageError(f"{text!r} is a peer address: give a session of this home (profile, profile/id or an id)")
    found = await directory.existing(parsed)
    if scope is not None and found.profile != scope:
        raise NotFound(f"no session {text!r} in profile {scope!r}", code="session_not_found")
    return found


async def list_sessions(request: Request) -> Response:
    """`GET /v1/sessions[?address=…&limit=…]`: most recently active first (under /p/<profile>: that profile's);
    with `address`, the one session it names."""
    directory = context(request).roster
    scope = scope_of(request, directory)
    address = request.query_params.get("address")
    if address is not None:
        rows = [await session_at(directory, address, scope=scope)]
    else:
        rows = await directory.sessions(scope, limit=int_param(request, "limit", 50, low=1, high=10_000))
    body: dialect.SessionRecords = {"object": "list", "data": [dialect.session_record(r) for r in rows]}
    return JSONResponse(body)


async def import_sessions(request: Request) -> Response:
    """`POST /p/<profile>/v1/sessions/import`: each session of the profile's Hermes gateway, known here under its
    Hermes id (new ones made)."""
    ctx = context(request)
    found = await ctx.roster.imported(profile_of(request))
    body: dialect.ImportedSessions = {
        "object": "list",
        "data": [
            {**dialect.session_record(i.session), "hermes_id": i.session.remote_id, "created": i.created} for i in found
        ],
    }
    return JSONResponse(body)
