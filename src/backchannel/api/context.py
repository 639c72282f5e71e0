"""What every handler needs, kept on the app: the gateway (its facades, messages and roster most of all), the API
key, the settings and the streams open."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from ..core.access import Caller
from ..core.delivery.admission import Attempt
from ..core.facades import Messages, Roster
from ..core.gateway import Gateway
from ..errors import UsageError
from ..home.config import GatewayConfig
from ..keys import check_external
from ..records import Session
from .http import DeliveryHeaders, delivery_headers, sender_of
from .stopping import StopRequest
from .stream_caps import Slot, StreamCaps, StreamLimits


@dataclass(frozen=True)
class Context:
    gateway: Gateway
    api_key: str
    instance: str = ""  # this process's public fingerprint, in /health and the runtime file
    grace: float = 10.0  # what running turns get to finish when the gateway stops
    stop: StopRequest = field(default_factory=StopRequest)  # POST /v1/gateway/stop sets it; the server watches
    streams: StreamCaps = field(init=False)  # the streams open, within the gateway's settings' bounds

    def __post_init__(self) -> None:
        object.__setattr__(self, "streams", StreamCaps(StreamLimits.of(self.gateway.settings)))

    @property
    def messages(self) -> Messages:
        return self.gateway.messages

    @property
    def roster(self) -> Roster:
        return self.gateway.roster

    @property
    def settings(self) -> GatewayConfig:
        return self.gateway.settings


def context(request: Request) -> Context:
    ctx: Context = request.app.state.backchannel
    return ctx


def caller(request: Request) -> Caller:
    """Who made the request (set by the app's key check)."""
    who: Caller = request.state.caller
    return who


def stream_slot(request: Request, run_id: str | None = None) -> Slot:
    """A place for the stream the request opens (following `run_id`): TooManyStreams when its key, the run or
    the peers together hold as many as they may."""
    return context(request).streams.take(caller(request), run_id)


def incoming(
    request: Request, ctx: Context, session: Session, body: dict[str, Any], message: str | None
) -> tuple[Attempt, DeliveryHeaders]:
    """A request's message as the delivery service takes it: key, sender, hops and chain from its headers."""
    headers = delivery_headers(request)
    who = caller(request)
    author = body.get("author")
    if author is not None and not isinstance(author, dict):
        raise UsageError("field 'author' must be an object {id, name, is_bot}", code="invalid_author")
    return (
        Attempt.handed_in(
            session=session,
            text=message or "",
            sender=who.sender(headers.sender_profile) if who.peer else sender_of(request),
            key=check_external(headers.idempotency_key),
            hops=headers.hops,
            chain=headers.chain,
            exchange=headers.exchange,
            steer=headers.steer,
            deadline=headers.deadline,
        ),
        headers,
    )
