"""What every handler needs: the router, the API key and the gateway settings, kept on the app."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from ..core.directory import Delivery, Router
from ..home.config import GatewayConfig
from ..store.sessions import SessionRow
from .http import DeliveryHeaders, delivery_headers, sender_of


@dataclass(frozen=True)
class Context:
    router: Router
    api_key: str
    settings: GatewayConfig
    gateway_id: str


def context(request: Request) -> Context:
    ctx: Context = request.app.state.backchannel
    return ctx


def submit(
    request: Request, ctx: Context, session: SessionRow, body: dict[str, Any], message: str | None
) -> tuple[Delivery, DeliveryHeaders]:
    """Hand a request's message to the router with what its headers say: key, sender, hops, chain."""
    headers = delivery_headers(request)
    delivery = ctx.router.submit(
        session,
        message or "",
        sender=sender_of(request, body, headers, ctx.router.peer_sender),
        idempotency_key=headers.idempotency_key,
        hops=headers.hops,
        chain=headers.chain,
    )
    return delivery, headers
