"""The SDK's JSON-RPC and REST dispatchers over our request handler (0.3 clients answered too), and the card.

The protocol version is the `A2A-Version` header's, or the `A2A-Version` query parameter's (§3.6.1 allows
either; the SDK reads only the header); with neither, the SDK takes the request as 0.3 (§3.6.2).
"""

from __future__ import annotations

from typing import Any

from a2a.compat.v0_3.conversions import to_compat_agent_card
from a2a.extensions.common import HTTP_EXTENSION_HEADER, get_requested_extensions
from a2a.server.context import ServerCallContext
from a2a.server.routes import ServerCallContextBuilder, create_jsonrpc_routes, create_rest_routes
from a2a.utils.constants import VERSION_HEADER
from google.protobuf.json_format import MessageToDict
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Router

from ...home.profiles import DEFAULT_PROFILE, Profile
from ..context import Context, caller
from ..http import profile_of
from . import sdk_logs
from .card import agent_card
from .handler import CALLER, PROFILE, RunsHandler
from .rest_answers import OnError, RestAnswer

_VERSION = VERSION_HEADER.lower()


class _CallerContext(ServerCallContextBuilder):
    """The context the SDK reads (the headers, where the version is; the extensions asked for) with the key's
    caller and the path's profile in it instead of the key, and the version from the query when no header
    gives it."""

    def build(self, request: Request) -> ServerCallContext:
        headers = {name: value for name, value in request.headers.items() if name != "authorization"}
        if not headers.get(_VERSION):
            version = _query_version(request)
            if version:
                headers[_VERSION] = version
        return ServerCallContext(
            state={"headers": headers, CALLER: caller(request), PROFILE: profile_of(request)},
            requested_extensions=get_requested_extensions(request.headers.getlist(HTTP_EXTENSION_HEADER)),
        )


def _query_version(request: Request) -> str | None:
    return next((v for k, v in request.query_params.multi_items() if k.lower() == _VERSION), None)


class Served:
    """What the A2A endpoints serve once the SDK is loaded: the JSON-RPC dispatcher, the REST routes (both
    with the 0.3 method names and paths too) and the cards."""

    def __init__(self, ctx: Context) -> None:
        sdk_logs.quiet()
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

    def rest(self, request: Request, path: str, *, on_error: OnError) -> Response:
        """The REST route at `path` (what follows `.../a2a/rest`) answering `request`, in the spec's terms."""
        return RestAnswer(self._rest, {**request.scope, "path": path, "root_path": ""}, request.receive, on_error)

    def card(self, profile: Profile, base_url: str, *, legacy: bool = False) -> dict[str, Any]:
        """The profile's card in 1.0's shape (what the v1.0 JSON schema allows, nothing of 0.3's), or, `legacy`,
        in 0.3's (`url`, `preferredTransport`, `additionalInterfaces`, `protocolVersion`, `security`)."""
        base = base_url.rstrip("/")
        prefix = "" if profile.name == DEFAULT_PROFILE else f"/p/{profile.name}"
        card = agent_card(profile, f"{base}{prefix}/a2a")
        if legacy:
            compat: dict[str, Any] = to_compat_agent_card(card).model_dump(exclude_none=True, by_alias=True)
            return compat
        return MessageToDict(card)
