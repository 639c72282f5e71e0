"""The network layer's own parts: the SSE parser, and the HTTP transport's error map and Retry-After rule."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from backchannel.net import sse
from backchannel.net.sse import Event, SseParser

# --- the SSE parser ------------------------------------------------------------------------------

STREAM = (
    b": keepalive\n"
    b"retry: 3000\n"
    b"event: run.started\nid: 1\ndata: {\"a\": 1}\n\n"
    b"data: first line\ndata: second line\n\n"
    b"id: 7\ndata:no space\n\n"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    Event('{"a": 1}', "run.started", "1"),
    Event("first line\nsecond line", "message", "1"),
    Event("no space", "message", "7"),
    Event("[DONE]", "message", "7"),
]


def _feed_all(chunks: list[bytes]) -> list[Event]:
    parser = SseParser()
    events: list[Event] = []
    for chunk in chunks:
        events += parser.feed(chunk)
    return events + parser.close()


def test_sse_events_are_the_same_at_every_chunk_boundary() -> None:
    assert _feed_all([STREAM]) == EXPECTED
    for size in (1, 2, 3, 5, 7, 64):
        chunks = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
        assert _feed_all(chunks) == EXPECTED, size
    for cut in range(len(STREAM) + 1):
        assert _feed_all([STREAM[:cut], STREAM[cut:]]) == EXPECTED, cut


def test_sse_an_event_is_delivered_as_soon_as_its_blank_line_arrives() -> None:
    parser = SseParser()
    assert parser.feed(b"data: one\n") == []
    assert parser.feed(b"\ndata: tw") == [Event("one")]
    assert parser.feed(b"o\n\n") == [Event("two")]
    assert parser.close() == []


def test_sse_multi_line_data_is_joined_with_newlines() -> None:
    assert _feed_all([b"data: a\ndata:\ndata:  c\n\n"]) == [Event("a\n\n c")]


def test_sse_crlf_and_lone_cr_end_lines_even_split_between_chunks() -> None:
    crlf = STREAM.replace(b"\n", b"\r\n")
    cr = STREAM.replace(b"\n", b"\r")
    for stream in (crlf, cr):
        for cut in range(len(stream) + 1):
            assert _feed_all([stream[:cut], stream[cut:]]) == EXPECTED, (stream[:cut], stream[cut:])


def test_sse_comments_retry_and_blocks_without_data_dispatch_nothing() -> None:
    assert _feed_all([b": hello\n\nretry: 10\n\nevent: lonely\n\n: bye\n\n"]) == []
    # an `event:` without data does not leak into the next event
    assert _feed_all([b"event: lonely\n\ndata: x\n\n"]) == [Event("x", "message")]


def test_sse_a_final_event_without_a_blank_line_is_delivered_on_close() -> None:
    parser = SseParser()
    assert parser.feed(b"data: one\n\ndata: last") == [Event("one")]
    assert parser.close() == [Event("last")]
    parser = SseParser()
    assert parser.feed(b"data: last\n") == []
    assert parser.close() == [Event("last")]


def test_sse_utf8_split_inside_a_character_and_a_bom_at_the_start() -> None:
    raw = "\ufeffdata: héllo ✓\n\n".encode()
    assert _feed_all([raw[:1], raw[1:12], raw[12:13], raw[13:]]) == [Event("héllo ✓")]


def test_sse_parse_reads_an_async_byte_stream() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(STREAM), 4):
            yield STREAM[i : i + 4]
        yield b"data: tail"

    async def collect() -> list[Event]:
        return [event async for event in sse.parse(chunks())]

    assert asyncio.run(collect()) == [*EXPECTED, Event("tail", "message", "7")]


@pytest.mark.parametrize("field", [b"data", b"event", b"id"])
def test_sse_a_field_name_must_match_exactly(field: bytes) -> None:
    # "datum:", "events:" and "identity:" are unknown fields, ignored
    assert _feed_all([field + b"x: nope\ndata: yes\n\n"]) == [Event("yes")]
