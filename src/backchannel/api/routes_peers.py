"""A person's message to an agent on a peer gateway (the person's key only): what `backchannel peer dm` and
`send peer:…` ask a running gateway, so the command builds no core of its own.

`POST /v1/peers/{name}/messages` `{"message": …, "agent": …?}` with `Idempotency-Key` (the same key again asks
the peer about the same message: it never runs twice) and `X-Hermes-Wait-Seconds` (how long the peer's reply is
waited for). Into the Bot Chat of `agent` on the peer (its default agent when none), kept in this home's ledger;
the answer is the outcome, as `send` prints it with `--json`, and whether the peer deduplicates.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .context import context
from .http import delivery_headers, json_body, optional_str, profile_of, text_field


async def send_to_peer(request: Request) -> Response:
    ctx = context(request)
    ctx.directory.check_profile(profile_of(request))  # under /p/{profile}: a profile of the home, as every route
    peer = ctx.gateway.outbound.peer(request.path_params["name"])
    body = await json_body(request, ctx.settings.max_body_bytes, timeout=ctx.settings.body_timeout_seconds)
    message = text_field(body, "message", "input", required=True)
    agent = optional_str(body, "agent")
    headers = delivery_headers(request)
    wait = headers.wait_or(ctx.settings.http_wait_seconds)
    key = headers.key_or_new()
    result = await ctx.gateway.outbound.dm(peer, agent or None, message or "", wait=wait, key=key)
    return JSONResponse({**result.to_dict(), "deduplicated": result.deduplicated})
