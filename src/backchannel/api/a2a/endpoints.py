"""The A2A routes' endpoints: they load the SDK on first use and hand each request over to it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive, Scope

from ...errors import UsageError
from .. import jsonbody
from ..context import context
from ..http import profile_of, read_body

if TYPE_CHECKING:
    from .served import Served

# The SDK's OpenTelemetry instrumentation is on by default; off unless the operator asks for it.
OTEL_SWITCH = "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED"


class A2AEndpoints:
    """The JSON-RPC and REST endpoints (behind the app's key check) and the public agent card of every profile."""

    def __init__(self) -> None:
        self._served: Served | None = None

    def _load(self, request: Request) -> Served:
        if self._served is None:
            os.environ.setdefault(OTEL_SWITCH, "false")
            from .served import Served  # the SDK, imported only once A2A is asked for

            self._served = Served(context(request))
        return self._served

    async def jsonrpc(self, request: Request) -> Response:
        """A2A JSON-RPC on the profile's runs, as the key's caller (the 0.3 method names too).

        The body is read here within the gateway's size and time bounds and parsed within its JSON bounds
        (depth, numbers, valid text), then handed to the SDK; a body past them is JSON-RPC's parse error."""
        served = self._load(request)
        bounded = await _bounded(request)
        try:
            parsed = jsonbody.parse(bounded.raw)
        except UsageError as exc:
            return served.parse_error(exc)
        return await served.dispatch(_Parsed(bounded, parsed))

    async def rest(self, request: Request) -> Response:
        """A2A over HTTP+JSON (`.../a2a/rest/message:send`, `/tasks/{id}`, ...), the same as JSON-RPC."""
        served = self._load(request)
        return served.rest(await _bounded(request), "/" + request.path_params["rest"])

    async def card(self, request: Request) -> Response:
        """The profile's agent card: public, like /health."""
        ctx = context(request)
        profile = ctx.directory.profile(ctx.directory.check_profile(profile_of(request)))
        return JSONResponse(self._load(request).card(profile, str(request.base_url)))


class _Read(Request):
    """A request whose body has been read (`raw`): the SDK reads it again from here, and a stream then learns
    from the connection when the client leaves."""

    def __init__(self, scope: Scope, receive: Receive, raw: bytes) -> None:
        given = False

        async def replay() -> Message:
            nonlocal given
            if given:
                return await receive()
            given = True
            return {"type": "http.request", "body": raw, "more_body": False}

        super().__init__(scope, replay)
        self.raw = raw


class _Parsed(Request):
    """The request with its JSON already parsed within the gateway's bounds: what the SDK's `json()` reads."""

    def __init__(self, read: _Read, parsed: Any) -> None:
        super().__init__(read.scope, read.receive)
        self._parsed = parsed

    async def json(self) -> Any:
        return self._parsed


async def _bounded(request: Request) -> _Read:
    """The request with its body read within the gateway's size and time bounds (413 or 408 past them)."""
    ctx = context(request)
    ctx.directory.check_profile(profile_of(request))
    raw = await read_body(request, ctx.settings.max_body_bytes, timeout=ctx.settings.body_timeout_seconds)
    return _Read(request.scope, request.receive, raw)
