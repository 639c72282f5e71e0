"""The person's messages (the person's key only), each through the one door (`core.delivery.door`).

`POST /v1/messages` `{"to": ADDRESS, "message": …, "stream": false}`: ADDRESS is any address of the grammar (a
profile, `profile/session-id`, a session id, `peer:NAME[/AGENT]`, `group:NAME`). Headers: `Idempotency-Key` (the
same key again answers for the same message: it never runs twice), `X-Hermes-Wait-Seconds` (how long the reply is
waited for), `X-Backchannel-Sender: human:<surface>`, `X-Backchannel-Mode: steer`. The answer is the outcome as
`backchannel send --json` prints it; with `"stream": true` (a session of this home) the run's events as
`/api/sessions/{id}/chat/stream` sends them.

`POST /v1/peers/{name}/messages` `{"message", "agent"?}` and `POST /v1/groups/{name}/messages` `{"message"}` say
the same with the address in the path.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..addresses import RemoteAddress, Target, as_group, as_local, parse_peer, parse_target
from ..errors import UsageError
from ..outcome import GroupResult
from .context import Context, context, incoming, stream_slot
from .http import delivery_headers, json_body, optional_str, profile_of, sender_of, text_field
from .routes_sessions import chat_events


async def send_message(request: Request) -> Response:
    ctx = context(request)
    body = await _body(request, ctx)
    to = optional_str(body, "to")
    if not to:
        raise UsageError("missing field 'to' (an address: profile, profile/session-id, peer:NAME, group:NAME)")
    address = parse_target(to)
    if body.get("stream") is True:
        local = as_local(address)
        if local is None:
            raise UsageError(f"{to!r}: a stream follows a message to a session of this home", code="invalid_address")
        session = await ctx.messages.addressed(local)
        message_in, headers = incoming(request, ctx, session, body, text_field(body, "message", required=True))
        with stream_slot(request) as slot:  # before the message is handed in: a refused stream sent nothing
            return slot.holding(await chat_events(request, ctx, message_in, headers))
    return await _send(request, ctx, address, body)


async def send_to_peer(request: Request) -> Response:
    ctx = context(request)
    body = await _body(request, ctx)
    agent = optional_str(body, "agent")
    remote = parse_peer(request.path_params["name"] + (f"/{agent}" if agent else ""))
    return await _send(request, ctx, RemoteAddress(remote.peer, remote.profile), body)


async def send_to_group(request: Request) -> Response:
    ctx = context(request)
    address = as_group(parse_target("group:" + request.path_params["name"]))
    if address is None:
        raise UsageError("not a group name", code="invalid_address")
    return await _send(request, ctx, address, await _body(request, ctx))


async def _body(request: Request, ctx: Context) -> dict[str, Any]:
    ctx.roster.check_profile(profile_of(request))  # under /p/{profile}: a profile of the home, as every route
    return await json_body(request, ctx.settings.max_body_bytes, timeout=ctx.settings.body_timeout_seconds)


async def _send(request: Request, ctx: Context, to: Target, body: dict[str, Any]) -> Response:
    headers = delivery_headers(request)
    key = headers.key_or_new()
    sent = await ctx.messages.send(
        to,
        text_field(body, "message", "input", required=True) or "",
        sender=sender_of(request),
        key=key,
        wait=headers.wait_or(ctx.settings.http_wait_seconds),
        steer=headers.steer,
        deadline=headers.deadline,
    )
    if isinstance(sent, GroupResult):
        return JSONResponse({**sent.to_dict(), "idempotency_key": key})
    return JSONResponse({**sent.to_dict(), "idempotency_key": key, "deduplicated": sent.deduplicated})
