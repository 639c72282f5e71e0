"""`GET /metrics`: the gateway's metrics in the Prometheus text format (`core.metrics`), for the person's key or
a key made to scrape them (`backchannel key create NAME --metrics`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ..errors import NotFound
from .context import caller, context
from .http import profile_of


async def metrics(request: Request) -> Response:
    caller(request).require_metrics()
    context(request).roster.check_profile(profile_of(request))  # under /p/<profile>: one of this home's
    counted = context(request).gateway.admin.metrics
    if counted is None:  # a gateway built without them (none that serves HTTP)
        raise NotFound("this gateway counts no metrics")
    from ..core.metrics import CONTENT_TYPE

    return Response(await counted.render(), media_type=CONTENT_TYPE)
