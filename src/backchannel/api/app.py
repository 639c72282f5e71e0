"""The HTTP app: routes at the root and under /p/{profile}, auth, and the one error envelope."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from .. import tracing
from ..core.access import Caller
from ..errors import AuthError, BackchannelError, TooManyStreams
from ..home.redact import redact
from . import web
from .a2a import A2AEndpoints
from .a2a import errors as a2a_errors
from .context import Context, context
from .http import bearer, challenge, profile_of
from .lf_streams import LfStream
from .mcp_route import McpRoute
from .openapi import Endpoint, Op, Reach
from .surface import OPERATIONS

log = logging.getLogger("backchannel.api")

def protected(endpoint: Endpoint, reach: Reach = "profile", *, spanned: bool = False) -> Endpoint:
    """The route with its key checked (`surface.Reach`): the caller (the person, or the peer whose key it is) is
    kept on the request; a peer's key reaches only the profiles it was made for (and `person` routes not at all).
    An agent's key reaches only the `agent` routes (its sessions' tools and mentions), for its own profile; those
    are the person's otherwise. A run route at the root finds a run in any profile: the route checks the run's own
    profile.

    Traced, a request is a server span `METHOD /route`, unless `spanned`: the route's work has a server span of
    its own (a message handed in is its run's `invoke_agent`; an A2A request, its method's), a child of the
    caller's context with nothing between (a span less per turn)."""

    async def guarded(request: Request) -> Response:
        if not tracing.active():
            return await checked(request)
        # The caller's trace context is a parent only: who sends is what its key says.
        caller = tracing.from_headers(request.headers)
        if spanned:
            with tracing.under(caller):
                return await checked(request)
        with tracing.span(*_server_span(request), parent=caller) as span:
            response = await checked(request)
            if span is not None:
                span.set_attribute("http.response.status_code", response.status_code)
            return response

    async def checked(request: Request) -> Response:
        ctx = context(request)
        who = await ctx.gateway.keys.identify(bearer(request), person_key=ctx.api_key)
        request.state.caller = who
        what = f"{request.method} {request.url.path}"
        if reach != "agent":
            who.require_agent_route(what)
        if reach == "person" or (reach == "agent" and who.acts_as is None):
            who.require_person(what)
        if reach == "home":  # the home's as a whole: the route asks the caller itself
            return await endpoint(request)
        if reach != "run" or "profile" in request.path_params:
            who.require_profile(profile_of(request))
        return await endpoint(request)

    guarded.__name__ = endpoint.__name__
    guarded.__doc__ = endpoint.__doc__
    return guarded


def _server_span(request: Request) -> tuple[str, str, dict[str, object]]:
    """A request's span, `METHOD /route/{template}` (the route as declared, not the path with its ids)."""
    route = getattr(request.scope.get("route"), "path", None)
    if route is not None and "profile" in request.path_params and not route.startswith("/p/"):
        route = f"/p/{{profile}}{route}"
    return (
        f"{request.method} {route or ''}".rstrip(),
        "server",
        {"http.request.method": request.method, "http.route": route},
    )


def _route(op: Op) -> Route:
    endpoint = op.endpoint if op.reach == "public" else protected(op.endpoint, op.reach, spanned=op.spanned)
    return Route(op.path, endpoint, methods=[op.method])


def _a2a_routes(a2a: A2AEndpoints) -> list[BaseRoute]:
    return [
        Route("/a2a/jsonrpc", protected(a2a.jsonrpc, spanned=True), methods=["POST"]),
        Route("/a2a/jsonrpc/", protected(a2a.jsonrpc, spanned=True), methods=["POST"]),  # httpx clients post to …/
        Route("/a2a/rest/{rest:path}", protected(a2a.rest, spanned=True), methods=["GET", "POST", "DELETE"]),
    ]


async def _backchannel_error(request: Request, exc: Exception) -> Response:
    """Every error a route raises, as the one envelope (or the web view's page), naming no path of the home; told
    in full to the person only (anyone else reads what its class says plainly: a store's address is theirs)."""
    assert isinstance(exc, BackchannelError)
    redact(exc, context(request).gateway.root)
    if not _from_person(request):
        exc.concealed()
    if web.is_web(request):
        return web.error_page(request, exc.http_status, exc.message, exc.code)
    headers: dict[str, str] = {}
    if exc.retry_after is not None:
        headers["Retry-After"] = f"{exc.retry_after:.0f}"
    if isinstance(exc, AuthError):
        headers["WWW-Authenticate"] = challenge(exc)
    if isinstance(exc, TooManyStreams):  # its connection is let go at once, not kept alive for another try
        headers["Connection"] = "close"
    binding = a2a_errors.binding_of(request)
    if binding is not None:  # an A2A client reads A2A's error shapes (a refused key, a profile it does not reach)
        return a2a_errors.response(binding, a2a_errors.of_error(exc), headers=headers or None)
    return JSONResponse(exc.envelope(), status_code=exc.http_status, headers=headers or None)


def _from_person(request: Request) -> bool:
    """Whether the request is the person's: their key (as the key check found it), or their web login."""
    who = getattr(request.state, "caller", None)
    if isinstance(who, Caller):
        return who.is_person
    return web.is_web(request) and web.web_auth(request).session(request) is not None


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request")
    message = "no such route" if exc.status_code == 404 else str(exc.detail)
    binding = a2a_errors.binding_of(request)
    if binding is not None:
        where = f"{message}: {request.method} {request.url.path}"
        return a2a_errors.response(binding, a2a_errors.no_route(exc.status_code, where, code))
    if web.is_web(request):
        return web.error_page(request, exc.status_code, f"{message}: {request.method} {request.url.path}", code)
    return JSONResponse(
        {
            "error": {
                "message": f"{message}: {request.method} {request.url.path}",
                "type": "invalid_request_error",
                "code": code,
            }
        },
        status_code=exc.status_code,
        headers=getattr(exc, "headers", None),
    )


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return JSONResponse(
        {
            "error": {
                "message": f"internal error: {type(exc).__name__}",
                "type": "server_error",
                "code": "internal_error",
            }
        },
        status_code=500,
    )


MCP_METHODS = ["GET", "POST", "DELETE"]


def create_app(ctx: Context, *, lifespan: Callable[[Starlette], Any] | None = None, web_view: bool = True) -> Starlette:
    """The app; `lifespan` (the gateway's start and stop) runs around the MCP endpoint's own. Without `web_view`
    (a command's own gateway, which no browser reaches) it serves no pages and keeps no cookie secret."""
    mcp = McpRoute(ctx.gateway, ctx.api_key)
    a2a = A2AEndpoints()
    discovery = [  # no key asked
        Route("/.well-known/agent-card.json", a2a.card, methods=["GET"]),
        Route("/.well-known/agent.json", a2a.legacy_card, methods=["GET"]),  # where 0.3 clients looked first
    ]
    api = [*discovery, *_a2a_routes(a2a), Route("/mcp", LfStream(mcp), methods=MCP_METHODS)]  # MCP's streams: LF
    mounted = [_route(op) for op in OPERATIONS if op.mounted]
    routes: list[BaseRoute] = [
        # Early: a /p/ path is matched against the routes in order, and no other route starts with /p/.
        Mount("/p/{profile}", routes=[*mounted, *api]),
        *(_route(op) for op in OPERATIONS),
        *api,
        *(web.routes() if web_view else ()),
    ]

    @contextlib.asynccontextmanager
    async def both(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if lifespan is not None:
                await stack.enter_async_context(lifespan(app))
            if web_view:
                await app.state.web_auth.logouts.load()  # the web view's logouts, once the gateway's store is open
            await stack.enter_async_context(mcp.running())
            yield

    app = Starlette(
        routes=routes,
        exception_handlers={BackchannelError: _backchannel_error, HTTPException: _http_error, Exception: _unexpected},
        lifespan=both,
    )
    app.state.backchannel = ctx
    if web_view:
        app.state.web_auth = web.make_auth(ctx.gateway.root, ctx.api_key, ctx.gateway.keys.revocations)
    return app
