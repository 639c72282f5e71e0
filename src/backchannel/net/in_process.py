"""An ASGI app in this process as an httpx transport, its answers streamed as the app sends them.

httpx's own `ASGITransport` hands over an answer once the app has sent all of it, which a stream of a run's
events never does before the run ends; this one gives each body part to the reader as it comes, and tells the
app the client went away (`http.disconnect`) when the reader closes the answer early.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import httpx

Message = MutableMapping[str, Any]
App = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]


class InProcessTransport(httpx.AsyncBaseTransport):
    """Requests answered by `app` (an ASGI application) in this event loop, with no socket between."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "server": (request.url.host, request.url.port or 80),
            "client": ("127.0.0.1", 0),
            "root_path": "",
        }
        parts: asyncio.Queue[bytes | None] = asyncio.Queue()
        head: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] = asyncio.get_running_loop().create_future()
        gone = asyncio.Event()
        sent_body = False

        async def receive() -> Message:
            nonlocal sent_body
            if not sent_body:
                sent_body = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start" and not head.done():
                head.set_result((message["status"], list(message.get("headers", []))))
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    await parts.put(bytes(message["body"]))
                if not message.get("more_body", False):
                    await parts.put(None)

        async def serve() -> None:
            try:
                await self.app(scope, receive, send)
            except Exception as exc:  # the app's own error answers are sent; this is one it did not answer
                if not head.done():
                    head.set_exception(exc)
            finally:
                await parts.put(None)

        task = asyncio.create_task(serve())
        try:
            status, headers = await head
        except BaseException:
            task.cancel()
            raise
        return httpx.Response(status, headers=headers, stream=_Parts(parts, task, gone), request=request)


class _Parts(httpx.AsyncByteStream):
    def __init__(self, parts: asyncio.Queue[bytes | None], task: asyncio.Task[None], gone: asyncio.Event) -> None:
        self.parts, self.task, self.gone = parts, task, gone

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while (part := await self.parts.get()) is not None:
            yield part

    async def aclose(self) -> None:
        self.gone.set()  # the app hears the client went away, and ends its answer
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(self.task, timeout=5.0)
        if not self.task.done():
            self.task.cancel()
