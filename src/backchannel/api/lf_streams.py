"""Event streams end their lines in LF: the SDKs' streams (A2A's, MCP's), whose lines sse-starlette ends in CRLF.

SSE allows CRLF, CR or LF, but Hermes's clients split frames on LF alone (`hermes-control-mcp` reads `"\\n\\n"`),
as Hermes's own gateway writes them. Our own streams are written with LF (`EventSourceResponse(sep="\\n")`); an
SDK's stream is made and sent inside the SDK, so it is sent through `LfStream`, which turns each CRLF of an event
stream's body into LF. A stream's bytes are JSON or comments, which hold no bare CR, so each CRLF is a line end
(a CR that ends one piece of the body waits for the next). Only the routes that can answer with an SDK's stream
pass through it: the chat turn does not.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Any

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

EVENT_STREAM = b"text/event-stream"
SEP = "\n"  # what our own event streams end their lines with


class LfStream:
    """An ASGI app (a route's, a response) sent as it is, but the body of an event stream with each CRLF as LF."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        streaming = False
        held_cr = False  # the last piece ended in CR: whether it ends a line is known from the next one

        async def sending(message: Message) -> None:
            nonlocal streaming, held_cr
            if message["type"] == "http.response.start":
                kind = dict(message.get("headers") or ()).get(b"content-type", b"")
                streaming = kind.split(b";")[0].strip().lower() == EVENT_STREAM
            elif streaming and message["type"] == "http.response.body":
                body = (b"\r" if held_cr else b"") + bytes(message.get("body", b""))
                more = bool(message.get("more_body", False))
                held_cr = more and body.endswith(b"\r")
                if held_cr:
                    body = body[:-1]
                message = {**message, "body": body.replace(b"\r\n", b"\n")}
            await send(message)

        await self.app(scope, receive, sending)


class _LfResponse(Response):
    """A response sent as `inner` is, through `LfStream` (nothing of a Response's own is made: its status and
    headers are read for a request's span and the stream caps)."""

    def __init__(self, inner: Response) -> None:
        self.inner = inner
        self.status_code = inner.status_code
        self.background = None
        self.raw_headers = inner.raw_headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await LfStream(self.inner)(scope, receive, send)


def event_stream(events: AsyncIterable[Any], *, ping: int = 15, **options: Any) -> Response:
    """Our own event stream (sse-starlette's, loaded with the first stream: a command's own gateway that streams
    nothing never loads it), its lines ended in LF unless `sep` says otherwise."""
    from sse_starlette.sse import EventSourceResponse

    return EventSourceResponse(events, ping=ping, **{"sep": SEP, **options})


def lf(response: Response) -> Response:
    """An SDK's answer that may be an event stream, sent with LF line ends: an EventSourceResponse is told to
    write them; any other answer (one that makes its stream inside) goes through `LfStream`."""
    from sse_starlette.sse import EventSourceResponse

    if isinstance(response, EventSourceResponse):
        response.sep = SEP
        return response
    return _LfResponse(response)
