"""The gateway itself over the API: `POST /v1/gateway/stop` (the person's key only) stops it as SIGTERM does."""

from __future__ import annotations

import logging
import os

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .context import context

log = logging.getLogger("backchannel.gateway")


async def stop_gateway(request: Request) -> Response:
    ctx = context(request)
    named = request.path_params.get("profile")
    if named is not None:
        ctx.roster.check_profile(str(named))
    running = ctx.gateway.running_turns
    if ctx.stop.request():
        log.info("stop asked over the API: running turns (%d) get up to %g s to finish", running, ctx.grace)
    return JSONResponse(
        {
            "object": "backchannel.gateway.stopping",
            "status": "stopping",
            "gateway_id": ctx.settings.gateway_id,
            "pid": os.getpid(),
            "grace_seconds": ctx.grace,
            "running_turns": running,
        },
        status_code=202,
    )
