"""The HTTP connection: uvicorn's httptools protocol with bounds on each request's head (bytes, headers, time).

uvicorn bounds neither the size of a request's head nor how long it may take to arrive (its keep-alive
timeout covers only the quiet between requests), so a sender could hold memory or connections forever.
Here every head must arrive within `header_timeout` seconds, in at most `max_header_bytes` bytes and
`max_headers` headers; past a bound the connection gets the error envelope (431 or 408) and is closed.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

FEED_BYTES = 8192  # a head is fed in pieces this size, so its bytes are counted before the parser buffers more


@dataclass(frozen=True)
class HeadLimits:
    max_header_bytes: int
    max_headers: int
    header_timeout: float


def protocol_class(limits: HeadLimits) -> type[asyncio.Protocol]:
    """The protocol class uvicorn instantiates per connection, with these limits."""
    return type("BoundedHttpProtocol", (BoundedHttpProtocol,), {"limits": limits})


class BoundedHttpProtocol(HttpToolsProtocol):
    """One connection; refuses a head that is too big, has too many headers or arrives too slowly."""

    limits = HeadLimits(max_header_bytes=65536, max_headers=100, header_timeout=10.0)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True
        self._head_bytes = 0
        self._header_count = 0
        self._refusal: tuple[int, str, str] | None = None
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self._in_head:
            super().data_received(data)
            return
        for start in range(0, len(data), FEED_BYTES):
            if self.transport.is_closing():
                return
            piece = data[start : start + FEED_BYTES]
            if not self._in_head:
                super().data_received(data[start:])
                return
            self._head_bytes += len(piece)
            super().data_received(piece)
            if self._in_head and self._head_bytes > self.limits.max_header_bytes:
                self._refuse(431, "header_too_large", f"the request head is over {self.limits.max_header_bytes} bytes")
                return

    # --- parser callbacks --------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if not self._in_head:  # the next request on a kept-alive connection
            self._head_bytes = 0
            self._start_head()
        self._header_count = 0

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_headers:
            self._refusal = (431, "too_many_headers", f"the request has over {self.limits.max_headers} headers")
            raise ValueError("too many headers")  # the parser stops; uvicorn answers through send_400_response
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._stop_timer()
        super().on_headers_complete()

    def send_400_response(self, msg: str) -> None:
        if self._refusal is None:
            super().send_400_response(msg)
            return
        status, code, message = self._refusal
        self._refuse(status, code, message)

    # --- helpers -------------------------------------------------------------------------------------

    def _start_head(self) -> None:
        self._in_head = True
        self._stop_timer()
        self._head_timer = self.loop.call_later(self.limits.header_timeout, self._head_too_slow)

    def _stop_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self._in_head and not self.transport.is_closing():
            if self._head_bytes == 0 and self.cycle is not None:
                self.transport.close()  # quiet after an answer: the keep-alive timeout's case, nothing to say
                return
            self._refuse(
                408, "request_timeout", f"the request head did not arrive within {self.limits.header_timeout:g} s"
            )

    def _refuse(self, status: int, code: str, message: str) -> None:
        self._stop_timer()
        if self.transport.is_closing():
            return
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": code}}).encode()
        reason = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}[status]
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
            % (status, reason, len(body), body)
        )
        self.transport.close()
