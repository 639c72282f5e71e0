"""The messaging tools and mentions as a session of a profile (the Hermes plugin's calls):
`POST …/tools/{tool}` and `POST …/mentions`."""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import dialect
from ..core.delivery.delivery import check_message
from ..core.delivery.mentions import WAIT_SECONDS
from ..core.hosted import CallOrigin
from ..errors import UsageError
from .context import context
from .http import json_body, profile_of

MAX_ORIGIN_CHARS = 256  # Hermes's X-Hermes-Session-Key is at most this long


async def call_tool(request: Request) -> Response:
    """Runs one tool as session `session_id` (its id here or its Hermes id), from the turn `origin` names; the
    model's errors (not_allowed, would_deadlock …) are in `result` with 200, like a tool result; a bad request is
    a 4xx."""
    ctx = context(request)
    profile = ctx.roster.check_profile(profile_of(request))
    body = await json_body(request, ctx.settings.max_body_bytes)
    arguments = body.get("arguments", {})
    if not isinstance(arguments, dict):
        raise UsageError("field 'arguments' must be a JSON object", code="invalid_arguments")
    done = await ctx.gateway.hosting.call(
        profile, request.path_params["session_id"], request.path_params["tool"], arguments, _origin(body)
    )
    return JSONResponse(
        {
            "object": "backchannel.tool_result",
            "tool": done.tool,
            "session": dialect.session_of(done.session),
            "run_id": done.run_id,
            "ok": done.ok,
            "result": json.loads(done.result),
        }
    )


def _origin(body: dict[str, object]) -> CallOrigin | None:
    """Where the call comes from, as the plugin says (`origin`: `run_id`, `tag`, `surface`); None when unsaid."""
    said = body.get("origin")
    if said is None:
        return None
    if not isinstance(said, dict):
        raise UsageError("field 'origin' must be a JSON object", code="invalid_arguments")
    fields: dict[str, str | None] = {}
    for name in ("run_id", "tag", "surface"):
        value = said.get(name)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_ORIGIN_CHARS):
            raise UsageError(
                f"field 'origin.{name}' must be a string of at most {MAX_ORIGIN_CHARS} characters",
                code="invalid_arguments",
            )
        fields[name] = value or None
    return CallOrigin(**fields)


async def answer_mentions(request: Request) -> Response:
    """A person's text typed in the session (a Hermes platform chat), its mentions answered as from it; text
    without mentions comes back as it is (`mentions: 0`)."""
    ctx = context(request)
    profile = ctx.roster.check_profile(profile_of(request))
    body = await json_body(request, ctx.settings.max_body_bytes)
    text = check_message(body.get("message"))
    wait = body.get("wait_seconds", WAIT_SECONDS)
    if not isinstance(wait, int | float) or isinstance(wait, bool) or not 0 <= wait <= WAIT_SECONDS:
        raise UsageError(f"field 'wait_seconds' must be a number from 0 to {WAIT_SECONDS:g}", code="invalid_arguments")
    session, rewritten, count = await ctx.gateway.hosting.mentions(
        profile, request.path_params["session_id"], text, wait=float(wait)
    )
    shown = dialect.session_of(session)
    return JSONResponse({"object": "backchannel.mentions", "session": shown, "mentions": count, "message": rewritten})
