"""The SDK's HTTP+JSON answers in the spec's terms: `application/json` (the binding's content type, §11.1, where
the SDK sends `application/a2a+json`), each error's HTTP status as §5.4 maps it, errors cut to size, and whole
numbers in a Struct written as integers (`json_numbers`).

The SDK's route runs when the answer is sent, after the endpoint has returned: the trace context current when
the answer was made (the caller's, from its `traceparent`) is made current again around it, so the method's
span continues the caller's trace as it does over JSON-RPC."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.responses import Response
from starlette.routing import Router
from starlette.types import Message, Receive, Scope, Send

from ... import tracing
from . import errors, json_numbers

JSON = "application/json"
OnError = Callable[[dict[str, Any]], None]  # told of each error answered (to log and count a bad request)


class RestAnswer(Response):
    """The SDK's REST router's answer to a rewritten request, its headers and errors brought to the spec."""

    def __init__(self, app: Router, scope: Scope, receive: Receive, on_error: OnError) -> None:
        super().__init__()
        self._app, self._scope, self._receive, self._on_error = app, scope, receive, on_error
        self._trace = tracing.here()  # the caller's context, made current again when the route runs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        held: Message | None = None  # a JSON answer's start, sent once its body is known (a stream's is not held)
        parts: list[bytes] = []

        async def answer(message: Message) -> None:
            nonlocal held
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if headers.get("content-type", "").startswith("application/a2a+json"):
                    headers["content-type"] = JSON
                if message["status"] >= 400 or headers.get("content-type", "").startswith(JSON):
                    held = message
                    return
            elif message["type"] == "http.response.body" and held is not None:
                parts.append(message.get("body", b""))
                if message.get("more_body"):
                    return
                status = held["status"]
                if status >= 400:
                    body, status, error = errors.bound_rest(b"".join(parts), status)
                    if error is not None:
                        self._on_error(error)
                else:
                    body = json_numbers.plain_body(b"".join(parts))
                headers = MutableHeaders(scope=held)
                headers["content-length"] = str(len(body))
                await send({**held, "status": status})
                await send({"type": "http.response.body", "body": body, "more_body": False})
                return
            await send(message)

        with tracing.under(self._trace):
            await self._app(self._scope, self._receive, answer)
