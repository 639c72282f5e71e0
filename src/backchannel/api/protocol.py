"""The HTTP connection: uvicorn's httptools protocol with bounds on each request's head (bytes, headers, time),
and room kept for the person past the connection cap.

uvicorn bounds neither the size of a request's head nor how long it may take to arrive (its keep-alive
timeout covers only the quiet between requests), so a sender could hold memory or connections forever.
Here every head must arrive within `header_timeout` seconds, in at most `max_header_bytes` bytes and
`max_headers` headers; past a bound the connection gets the error envelope (431 or 408) and is closed.

uvicorn answers 503 to every request once `max_connections` connections (or requests) are open, whoever
holds them: a peer's flood of connections would shut the person out. Its check is made once a request's
head is in, so the head can say whose it is: past the cap, a request of the person's (`Door.is_person`:
their key, their web login) is served in one of `reserved` places kept for them, however many connections
others hold; everyone else's still gets the 503.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

FEED_BYTES = 8192  # a head is fed in pieces this size, so its bytes are counted before the parser buffers more


@dataclass(frozen=True)
class HeadLimits:
    max_header_bytes: int
    max_headers: int
    header_timeout: float


Head = Sequence[tuple[bytes, bytes]]  # a request's headers as uvicorn reads them: names in lower case


@dataclass
class Door:
    """The connection cap: `max_connections` at once, and `reserved` places past it for the requests `is_person`
    says are the person's (asked only at the cap); `taken`: those places in use now (one server's, on its loop)."""

    max_connections: int
    reserved: int
    is_person: Callable[[Head], bool]
    taken: int = 0


def protocol_class(limits: HeadLimits, door: Door | None = None) -> type[asyncio.Protocol]:
    """The protocol class uvicorn instantiates per connection, with these limits (and this door: uvicorn's
    `limit_concurrency` alone without one)."""
    return type("BoundedHttpProtocol", (BoundedHttpProtocol,), {"limits": limits, "door": door})


class BoundedHttpProtocol(HttpToolsProtocol):
    """One connection; refuses a head that is too big, has too many headers or arrives too slowly."""

    limits = HeadLimits(max_header_bytes=65536, max_headers=100, header_timeout=10.0)
    door: Door | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True
        self._head_bytes = 0
        self._header_count = 0
        self._refusal: tuple[int, str, str] | None = None
        self._head_timer: asyncio.TimerHandle | None = None
        self._kept_place = False  # this connection's request is served in a place kept for the person

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        self._leave_place()
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
        if self.door is not None:  # uvicorn reads this request's cap from here, in the call below
            self.limit_concurrency = self._cap(self.door)
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        self._leave_place()
        super().on_response_complete()

    def send_400_response(self, msg: str) -> None:
        if self._refusal is None:
            super().send_400_response(msg)
            return
        status, code, message = self._refusal
        self._refuse(status, code, message)

    # --- helpers -------------------------------------------------------------------------------------

    def _cap(self, door: Door) -> int | None:
        """This request's connection cap: `max_connections`, or none for a request of the person's past it
        while a place kept for them is free (it takes the place until its answer is sent)."""
        if max(len(self.connections), len(self.tasks)) < door.max_connections:
            return door.max_connections
        if self._kept_place or door.taken >= door.reserved or not door.is_person(self.headers):
            return door.max_connections
        door.taken += 1
        self._kept_place = True
        return None

    def _leave_place(self) -> None:
        if self._kept_place and self.door is not None:
            self._kept_place = False
            self.door.taken -= 1

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
