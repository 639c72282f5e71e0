"""Server-sent events: one incremental parser from bytes, in chunks of any size, to complete events."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import Any

# A line ends at CRLF, LF or a lone CR (the event-stream grammar allows all three).
_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Event:
    """One dispatched event: its type, its data (`data:` lines joined by newlines) and the stream's last id."""

    data: str
    event: str = "message"
    id: str | None = None

    def json_object(self) -> dict[str, Any] | None:
        """The JSON object its data carries (a run event's); None for any other payload."""
        try:
            data = json.loads(self.data)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None


class SseParser:
    """Turns an event stream into events as its bytes arrive (the WHATWG rules, bar reconnection).

    Comments and `retry:` are ignored, a block without `data:` dispatches nothing, and unlike a browser
    a final event without its closing blank line is delivered by `close()` rather than dropped.
    """

    def __init__(self) -> None:
        self._partial = b""  # the bytes of a line whose end has not arrived yet
        self._after_cr = False  # the last chunk ended in CR: an LF at the start of the next one belongs to it
        self._started = False
        self._data: list[str] = []
        self._event = ""
        self._last_id: str | None = None

    def feed(self, chunk: bytes) -> list[Event]:
        """The events completed by `chunk`."""
        if self._after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._after_cr = False
        events: list[Event] = []
        start = 0
        for end in _LINE_END.finditer(chunk):
            self._line(self._partial + chunk[start : end.start()], events)
            self._partial = b""
            start = end.end()
        self._partial += chunk[start:]
        self._after_cr = start == len(chunk) and chunk.endswith(b"\r")
        return events

    def close(self) -> list[Event]:
        """The end of the stream: an unterminated last line and an event still open are delivered."""
        events: list[Event] = []
        if self._partial:
            self._line(self._partial, events)
            self._partial = b""
        self._dispatch(events)
        return events

    def _line(self, raw: bytes, events: list[Event]) -> None:
        if not self._started:
            self._started = True
            raw = raw.removeprefix(_BOM)
        if not raw:
            self._dispatch(events)
            return
        line = raw.decode("utf-8", "replace")
        if line.startswith(":"):
            return  # a comment (keepalives)
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        # `retry:` and unknown fields are ignored

    def _dispatch(self, events: list[Event]) -> None:
        if self._data:
            events.append(Event("\n".join(self._data), self._event or "message", self._last_id))
        self._data = []
        self._event = ""


async def parse(chunks: AsyncIterable[bytes]) -> AsyncIterator[Event]:
    """The events of a byte stream, each as soon as its blank line arrives; the last one at its end."""
    parser = SseParser()
    async for chunk in chunks:
        for event in parser.feed(chunk):
            yield event
    for event in parser.close():
        yield event


async def json_objects(chunks: AsyncIterable[bytes]) -> AsyncIterator[dict[str, Any]]:
    """The JSON objects carried in `data:` of a stream's events (run events); other payloads are skipped."""
    async for event in parse(chunks):
        if (data := event.json_object()) is not None:
            yield data
