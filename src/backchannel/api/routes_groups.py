"""A person's message to a group of the home (the person's key only): each member's outcome and how many were reached.

`POST /v1/groups/{name}/messages` `{"message": …}` with `Idempotency-Key` (each member's run keyed on it and the
member: the same request again answers for the same runs) and `X-Hermes-Wait-Seconds` (how long each member is
waited for). The chat routes take a session, never a group.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..addresses import GroupAddress, parse_target
from ..errors import UsageError
from .context import context
from .http import delivery_headers, json_body, sender_of, text_field


async def send_to_group(request: Request) -> Response:
    ctx = context(request)
    target = parse_target("group:" + request.path_params["name"])
    if not isinstance(target, GroupAddress):
        raise UsageError("not a group name", code="invalid_address")
    body = await json_body(request, ctx.settings.max_body_bytes, timeout=ctx.settings.body_timeout_seconds)
    message = text_field(body, "message", "input", required=True)
    headers = delivery_headers(request)
    wait = headers.wait_or(ctx.settings.http_wait_seconds)
    key = headers.key_or_new()
    sent = await ctx.gateway.group_sends.send(target, message or "", sender=sender_of(request), wait=wait, key=key)
    return JSONResponse({**sent.to_dict(), "idempotency_key": key})
