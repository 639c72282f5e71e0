"""The A2A routes' endpoints: they load the SDK on first use and hand each request over to it.

What reaches the SDK has been read within the gateway's bounds, is JSON (by its content type and its bytes)
and comes from a known key; what it answers is cut to size and, when it says the request was malformed,
logged as one line and counted against a peer's rate (a malformed parameter of 1 MB is neither echoed back
nor logged in full).
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive, Scope

from ...errors import BackchannelError, NotFound, UsageError
from ...home.redact import redact
from .. import jsonbody
from ..context import caller, context, stream_slot
from ..http import profile_of, read_body
from ..lf_streams import lf
from . import errors, json_numbers, stream_requests
from .card_caching import card_response, changed_at
from .errors import Binding

if TYPE_CHECKING:
    from .served import Served

log = logging.getLogger("backchannel.a2a")

# The SDK's OpenTelemetry instrumentation is on by default; off unless the operator asks for it.
OTEL_SWITCH = "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED"
VERSION = "a2a-version"
MAX_LOGGED_NAME = 60  # characters of a method name or path kept in the log line of a bad request
MAX_LOGGED_MESSAGE = 200  # characters of its error message


class A2AEndpoints:
    """The JSON-RPC and REST endpoints (behind the app's key check) and the public agent cards of every profile."""

    def __init__(self) -> None:
        self._served: Served | None = None
        self._started = time.time()  # the app is made as the gateway starts: its code and version are since then

    def _load(self, request: Request) -> Served:
        if self._served is None:
            os.environ.setdefault(OTEL_SWITCH, "false")
            from .served import Served  # the SDK, imported only once A2A is asked for

            self._served = Served(context(request))
        return self._served

    async def jsonrpc(self, request: Request) -> Response:
        """A2A JSON-RPC on the profile's runs, as the key's caller (the 0.3 method names too).

        The body is read here within the gateway's size and time bounds and parsed within its JSON bounds
        (depth, numbers, valid text), then handed to the SDK; a body that is not JSON is JSON-RPC's parse error,
        one sent as another content type ContentTypeNotSupported (-32005)."""
        served = self._load(request)
        try:
            read = await _bounded(request)
            _require_json(request)
            try:
                parsed = jsonbody.parse(read.raw)
            except UsageError as exc:  # JSON-RPC's parse error, answered with HTTP 200 as JSON-RPC's errors are
                return self._refused(request, "jsonrpc", errors.parse_error(exc.message, exc.code), "?")
        except BackchannelError as exc:  # no path of the home leaves in it
            return self._refused(request, "jsonrpc", errors.of_error(redact(exc, context(request).gateway.root)), "?")
        opening = stream_requests.of_jsonrpc(parsed)
        if opening is None:
            response = await served.dispatch(_Parsed(read, parsed))
        else:
            with stream_slot(request, opening.task_id) as slot:  # past the caps: 429, and the SDK is not asked
                response = await served.dispatch(_Parsed(read, parsed))
                if not isinstance(response, JSONResponse):  # a stream: its errors come inside it
                    return slot.holding(lf(response))
        if not isinstance(response, JSONResponse):
            return response
        body, error = errors.bound_jsonrpc(bytes(response.body))
        if error is not None:
            self.bad_request(request, "jsonrpc", error, _method(parsed))
            return Response(body, status_code=response.status_code, media_type="application/json")
        plain = json_numbers.plain_body(body)  # a data part's 42 is not answered 42.0
        if plain is not body:
            response.body = plain
            response.headers["content-length"] = str(len(plain))
        return response

    async def rest(self, request: Request) -> Response:
        """A2A over HTTP+JSON (`.../a2a/rest/message:send`, `/tasks/{id}`, ...), the same as JSON-RPC; a path
        with a trailing slash is the same path."""
        served = self._load(request)
        path = "/" + str(request.path_params["rest"]).rstrip("/")
        try:
            read = await _bounded(request)
            if request.method == "POST" and read.raw.strip():
                _require_json(request)
        except BackchannelError as exc:  # no path of the home leaves in it
            return self._refused(request, "rest", errors.of_error(redact(exc, context(request).gateway.root)), path)
        answer = served.rest(read, path, on_error=lambda error: self.bad_request(request, "rest", error, path))
        opening = stream_requests.of_rest(request.method, path)
        if opening is None:
            return answer
        with stream_slot(request, opening.task_id) as slot:  # past the caps: 429, and the SDK is not asked
            return slot.holding(lf(answer))

    async def card(self, request: Request) -> Response:
        """The profile's agent card: public, like /health. In 1.0, unless the request asks for 0.3 (its
        `A2A-Version` header or query parameter)."""
        version = request.headers.get(VERSION) or _query_version(request) or ""
        return await self._card(request, legacy=version.strip().startswith("0."))

    async def legacy_card(self, request: Request) -> Response:
        """The card at 0.3's own path (`/.well-known/agent.json`): in 0.3's shape, for 0.3 clients."""
        return await self._card(request, legacy=True)

    async def _card(self, request: Request, *, legacy: bool) -> Response:
        ctx = context(request)
        name = profile_of(request)
        try:
            profile = ctx.roster.profile(ctx.roster.check_profile(name))
        except NotFound:  # a stranger learns nothing of the other profiles' names
            raise NotFound(f"no profile {errors.bounded(name)!r}", code="profile_not_found") from None
        served = self._load(request)
        card = served.card(profile, str(request.base_url), legacy=legacy)
        return card_response(
            card,
            changed_at(profile, self._started),
            if_none_match=request.headers.get("if-none-match"),
            if_modified_since=request.headers.get("if-modified-since"),
        )

    def _refused(self, request: Request, binding: Binding, fail: errors.Failure, what: str) -> Response:
        """A request refused before the SDK saw it, in the binding's error shape."""
        body = fail.jsonrpc() if binding == "jsonrpc" else fail.rest()
        self.bad_request(request, binding, body["error"], what)
        headers = {"Retry-After": fail.metadata["retryAfter"]} if "retryAfter" in fail.metadata else None
        return JSONResponse(body, status_code=fail.http_status, headers=headers)

    def bad_request(self, request: Request, binding: Binding, error: dict[str, Any], what: str) -> None:
        """One bounded log line for a malformed request, counted against a peer's rate (the person has none)."""
        if not errors.is_bad_request(error, binding=binding):
            return
        who = caller(request)
        log.warning(
            "A2A bad request from %s (%s %s): %s %s",
            "the person" if who.is_person else who.principal,
            binding,
            what[:MAX_LOGGED_NAME],
            error.get("code"),
            str(error.get("message", ""))[:MAX_LOGGED_MESSAGE],
        )
        if who.peer is not None:
            context(request).messages.note_bad_request(who.principal)  # the key's count, whatever profile sends


def _require_json(request: Request) -> None:
    """A body sent as JSON: `application/json`, `application/a2a+json` or any `+json` type, or none said."""
    given = request.headers.get("content-type")
    if given is None:
        return
    media = given.split(";", 1)[0].strip().lower()
    if media == "application/json" or (media.startswith("application/") and media.endswith("+json")):
        return
    raise _NotJson(
        f"the request body is sent as {errors.bounded(media)!r}; A2A takes JSON (application/json or"
        " application/a2a+json)"
    )


class _NotJson(UsageError):
    http_status = 415
    code = "unsupported_media_type"


def _method(parsed: Any) -> str:
    method = parsed.get("method") if isinstance(parsed, dict) else None
    return method if isinstance(method, str) else "?"


def _query_version(request: Request) -> str | None:
    return next((v for k, v in request.query_params.multi_items() if k.lower() == VERSION), None)


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
    ctx.roster.check_profile(profile_of(request))
    raw = await read_body(request, ctx.settings.max_body_bytes, timeout=ctx.settings.body_timeout_seconds)
    return _Read(request.scope, request.receive, raw)
