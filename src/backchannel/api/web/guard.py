"""Which requests are the web view's, and the gate in front of its pages: a session cookie or the login form."""

from __future__ import annotations

import urllib.parse
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from .auth import WebAuth, WebSession

PREFIX = "/web/"
LOGIN = "/web/login"
WebEndpoint = Callable[[Request, WebSession], Awaitable[Response]]


def is_web(request: Request) -> bool:
    path = request.url.path
    return path == "/" or path.startswith(PREFIX)


def web_auth(request: Request) -> WebAuth:
    auth: WebAuth = request.app.state.web_auth
    return auth


def local_path(raw: str | None) -> str:
    """Where to go after logging in: a path on this gateway, never another site (`//host`, a scheme)."""
    if not raw or not raw.startswith("/") or raw.startswith("//") or "\\" in raw:
        return "/"
    return raw


def logged_in(endpoint: WebEndpoint) -> Callable[[Request], Awaitable[Response]]:
    """A page a browser sees only with its session cookie; without one a page asks it to log in."""

    async def guarded(request: Request) -> Response:
        auth = web_auth(request)
        session = auth.session(request)
        if session is None:
            wants_page = request.method == "GET" and "hx-request" not in request.headers
            if wants_page and "text/event-stream" not in request.headers.get("accept", ""):
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(f"{LOGIN}?{urllib.parse.urlencode({'next': target})}", status_code=303)
            session = auth.require(request)  # raises: an asset, a fragment, a stream or a form without a login
        return await endpoint(request, session)

    guarded.__name__ = endpoint.__name__
    return guarded
