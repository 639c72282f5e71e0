"""Event streams end their lines in LF: every `text/event-stream` answer the app serves, its own and the SDKs'.

SSE allows CRLF, CR or LF, and sse-starlette (under our routes and the A2A SDK's) and the MCP SDK write CRLF; but
Hermes's clients split frames on LF alone (`hermes-control-mcp` reads `"\\n\\n"`), as Hermes's own gateway writes
them. A stream's bytes are JSON or our own comments, which hold no bare CR, so each CRLF is a line end: it becomes
LF here, in one place, whoever wrote it (a CR that ends one piece of the body waits for the next).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

EVENT_STREAM = b"text/event-stream"


class LfEventStreams:
    """ASGI middleware: the body of an event stream with each CRLF turned into LF; any other answer as it is."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
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
