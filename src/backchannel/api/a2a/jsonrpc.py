"""The SDK's JSON-RPC dispatcher over our request handler, and the card as ProtoJSON."""

from __future__ import annotations

from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.routes import DefaultServerCallContextBuilder, create_jsonrpc_routes
from google.protobuf.json_format import MessageToDict
from starlette.requests import Request
from starlette.responses import Response

from ...home.profiles import DEFAULT_PROFILE, Profile
from ..context import Context, caller
from ..http import profile_of
from .card import agent_card
from .handler import CALLER, PROFILE, RunsHandler


class _CallerContext(DefaultServerCallContextBuilder):
    """The SDK's context (the headers it reads the version from, the extensions asked for), with the key's
    caller and the path's profile in it instead of the key."""

    def build(self, request: Request) -> ServerCallContext:
        built = super().build(request)
        built.state["headers"].pop("authorization", None)
        built.state.update({CALLER: caller(request), PROFILE: profile_of(request)})
        return built


class Served:
    """What the A2A endpoints serve once the SDK is loaded: the dispatcher and the cards."""

    def __init__(self, ctx: Context) -> None:
        (route,) = create_jsonrpc_routes(RunsHandler(ctx), "/", context_builder=_CallerContext())
        self._dispatch: Any = route.endpoint

    async def dispatch(self, request: Request) -> Response:
        response: Response = await self._dispatch(request)
        return response

    def card(self, profile: Profile, base_url: str) -> dict[str, Any]:
        base = base_url.rstrip("/")
        prefix = "" if profile.name == DEFAULT_PROFILE else f"/p/{profile.name}"
        card: dict[str, Any] = MessageToDict(agent_card(profile, f"{base}{prefix}/a2a/jsonrpc"))
        return card
