"""What every handler needs: the router, the API key and the gateway settings, kept on the app."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from ..config import GatewayConfig
from ..router import Router


@dataclass(frozen=True)
class Context:
    router: Router
    api_key: str
    settings: GatewayConfig
    gateway_id: str


def context(request: Request) -> Context:
    ctx: Context = request.app.state.backchannel
    return ctx
