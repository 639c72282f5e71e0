"""The SDK's JSON-RPC and REST dispatchers over our request handler (0.3 clients answered too), and the card.

The protocol version is the `A2A-Version` header's, or the `A2A-Version` query parameter's (§3.6.1 allows
either; the SDK reads only the header); with neither, the SDK takes the request as 0.3 (§3.6.2).
"""

from __future__ import annotations

from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder, create_jsonrpc_routes, create_rest_routes
from a2a.utils.constants import VERSION_HEADER
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Router
from starlette.types import Receive, Scope, Send

from ...home.profiles import DEFAULT_PROFILE, Profile
from ..context import Context, caller
from ..http import profile_of
from .card import agent_card
from .handler import CALLER, PROFILE, RunsHandler


class _CallerContext(DefaultServerCallContextBuilder):
    """The SDK's context (the headers it reads the version from, the extensions asked for), with the key's
    caller and the path's profile in it instead of the key, and the version from the query when no header
    gives it."""

    def build(self, request: Request) -> ServerCallContext:
        built = super().build(request)
        headers: dict[str, str] = built.state["headers"]
        headers.pop("authorization", None)
        version = _query_version(request)
        if version and not headers.get(VERSION_HEADER.lower()):
            headers[VERSION_HEADER.lower()] = version
        built.state.update({CALLER: caller(request), PROFILE: profile_of(request)})
        return built


def _query_version(request: Request) -> str | None:
    wanted = VERSION_HEADER.lower()
    return next((v for k, v in request.query_params.multi_items() if k.lower() == wanted), None)


class Served:
    """What the A2A endpoints serve once the SDK is loaded: the JSON-RPC dispatcher, the REST routes (both
    with the 0.3 method names and paths too) and the cards."""

    def __init__(self, ctx: Context) -> None:
        handler = RunsHandler(ctx)
        built = _CallerContext()
        (route,) = create_jsonrpc_routes(handler, "/", context_builder=built, enable_v0_3_compat=True)
        self._dispatch: Any = route.endpoint
        self._rest = Router(
            routes=create_rest_routes(handler, context_builder=built, enable_v0_3_compat=True), redirect_slashes=False
        )

    async def dispatch(self, request: Request) -> Response:
        response: Response = await self._dispatch(request)
        return response

    def rest(self, request: Request, path: str) -> Response:
        """The REST route at `path` (what follows `.../a2a/rest`) answering `request`."""
        return _Routed(self._rest, {**request.scope, "path": path, "root_path": ""}, request.receive)

    def card(self, profile: Profile, base_url: str) -> dict[str, Any]:
        base = base_url.rstrip("/")
        prefix = "" if profile.name == DEFAULT_PROFILE else f"/p/{profile.name}"
        return agent_card_to_dict(agent_card(profile, f"{base}{prefix}/a2a"))  # with its 0.3 form's fields


class _Routed(Response):
    """A response that is another ASGI app's answer (the SDK's REST router) to a rewritten request."""

    def __init__(self, app: Router, scope: Scope, receive: Receive) -> None:
        super().__init__()
        self._app, self._scope, self._receive = app, scope, receive

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(self._scope, self._receive, send)
