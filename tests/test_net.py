"""The network layer's own parts: the SSE parser, and the HTTP transport's error map and Retry-After rule."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from backchannel import __version__
from backchannel.errors import (
    BackchannelError,
    ConfigError,
    Forbidden,
    GatewayError,
    NotFound,
    PeerError,
    PeerOutcomeUnknown,
    Refused,
)
from backchannel.home.peers import Peer
from backchannel.net import sse
from backchannel.net.http import RETRIES, Naming, Transport, error_of, quote, retry_after
from backchannel.net.local import GatewayClient
from backchannel.net.peer import PeerClient
from backchannel.net.sse import Event, SseParser
from conftest import free_port

pytestmark = pytest.mark.quick  # pure: no home on disk, no process, no gateway (make quick)

# --- the SSE parser ------------------------------------------------------------------------------

STREAM = (
    b": keepalive\n"
    b"retry: 3000\n"
    b'event: run.started\nid: 1\ndata: {"a": 1}\n\n'
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


# --- the transport, against a raw HTTP server on a loopback port ---------------------------------

KEY = "k-secret-transport-123"
Handle = Callable[[int, bytes, asyncio.StreamWriter], Awaitable[bool]]


def answer(status: int, body: bytes = b"{}", *headers: str) -> bytes:
    head = [f"HTTP/1.1 {status} X", "Content-Type: application/json", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":", 1)[1]))
    return head


@contextlib.asynccontextmanager
async def serve(handle: Handle, port: int = 0) -> AsyncIterator[tuple[str, list[bytes]]]:
    """A server whose `handle(n, request_head, writer)` answers the n-th request; False closes the connection."""
    seen: list[bytes] = []

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (head := await _read_request(reader)) is not None:
                seen.append(head)
                if not await handle(len(seen), head, writer):
                    break
                await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(on_connection, "127.0.0.1", port)
    async with server:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", seen


def peer_naming(who: str = "peer 'spark'") -> Naming:
    return Naming(who, functools.partial(PeerError, code="peer_unreachable"), PeerOutcomeUnknown)


async def _get(url: str, *, timeout: float = 5.0) -> int:
    transport = Transport(url, KEY, naming=peer_naming(), follow_redirects=True)
    try:
        return (await transport.request("GET", "/x", timeout=timeout)).status
    finally:
        await transport.aclose()


def test_a_refused_connection_is_not_sent_names_the_peer_and_keeps_its_cause() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(PeerError) as info:
        asyncio.run(_get(url))
    assert not isinstance(info.value, PeerOutcomeUnknown)
    assert info.value.code == "peer_unreachable"
    assert str(info.value).startswith("could not reach peer 'spark'")
    assert isinstance(info.value.__cause__, httpx.ConnectError)


def test_a_refused_connection_is_tried_again_and_reaches_a_server_that_came_up() -> None:
    port = free_port()

    async def go() -> tuple[int, int]:
        async def ok(n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
            writer.write(answer(200))
            return True

        request = asyncio.create_task(_get(f"http://127.0.0.1:{port}"))
        await asyncio.sleep(0.1)  # the first attempt has failed by now; the retry comes after 0.2 s
        assert not request.done()
        async with serve(ok, port) as (_, seen):
            return await request, len(seen)

    assert asyncio.run(go()) == (200, 1)


def test_no_answer_in_time_may_have_been_sent_and_is_not_sent_again() -> None:
    async def silent(n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(5)
        return False

    async def go() -> list[bytes]:
        async with serve(silent) as (url, seen):
            with pytest.raises(PeerOutcomeUnknown) as info:
                await _get(url, timeout=0.3)
            assert info.value.code == "outcome_unknown"
            assert "peer 'spark' did not answer GET /x within 0.3s" in str(info.value)
            assert isinstance(info.value.__cause__, httpx.ReadTimeout)
            return seen

    assert len(asyncio.run(go())) == 1


def test_a_connection_that_breaks_mid_answer_may_have_been_sent() -> None:
    async def broken(n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"half')
        return False

    async def go() -> list[bytes]:
        async with serve(broken) as (url, seen):
            with pytest.raises(PeerOutcomeUnknown) as info:
                await _get(url)
            assert "the connection to peer 'spark' broke during GET /x" in str(info.value)
            assert isinstance(info.value.__cause__, httpx.HTTPError)
            return seen

    assert len(asyncio.run(go())) == 1


def test_429_and_503_are_tried_again_after_retry_after_as_seconds_or_an_http_date() -> None:
    past = email.utils.formatdate(time.time() - 60, usegmt=True)

    async def busy_then_ok(n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        if n == 1:
            writer.write(answer(503, b'{"error": "draining"}', "Retry-After: 0"))
        elif n == 2:
            writer.write(answer(429, b'{"error": "busy"}', f"Retry-After: {past}"))
        else:
            writer.write(answer(200))
        return True

    async def go() -> tuple[int, int, float]:
        async with serve(busy_then_ok) as (url, seen):
            started = time.monotonic()
            status = await _get(url)
            return status, len(seen), time.monotonic() - started

    status, requests, took = asyncio.run(go())
    assert (status, requests) == (200, 3)
    assert took < 0.8, "a Retry-After date in the past means now, not the 1 s default"


def test_tries_again_at_most_the_limit_then_returns_the_answer() -> None:
    async def always_busy(n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(answer(503, b"{}", "Retry-After: 0"))
        return True

    async def go() -> tuple[int, int]:
        async with serve(always_busy) as (url, seen):
            return await _get(url), len(seen)

    assert asyncio.run(go()) == (503, RETRIES + 1)


def test_retry_after_reads_seconds_and_http_dates_and_is_capped() -> None:
    now = 1_800_000_000.0
    assert retry_after("2", now=now) == 2.0
    assert retry_after("0.5", now=now) == 0.5
    assert retry_after("3600", now=now) == 5.0  # capped
    assert retry_after("-4", now=now) == 0.0
    assert retry_after(email.utils.formatdate(now + 3, usegmt=True), now=now) == pytest.approx(3.0)
    assert retry_after(email.utils.formatdate(now + 3600, usegmt=True), now=now) == 5.0
    assert retry_after(email.utils.formatdate(now - 30, usegmt=True), now=now) == 0.0
    for junk in (None, "", "soon", "nan", "inf", "Mon, 99 Foo 2026 25:61:00 GMT"):
        assert retry_after(junk, now=now) == 1.0, junk


def test_error_envelope_is_read_as_an_object_a_string_or_a_top_level_code() -> None:
    envelope = {"error": {"message": "taken", "type": "invalid_request_error", "code": "conflict", "run_id": "r1"}}
    full = error_of(409, envelope)
    assert (full.message, full.code, full.type) == ("taken", "conflict", "invalid_request_error")
    assert dict(full.details) == {"run_id": "r1"}
    loose = error_of(400, {"error": "bad title"})
    assert (loose.message, loose.code) == ("bad title", None)
    assert error_of(403, {"error": {"message": "no", "reason": "not_allowed"}}).code == "not_allowed"
    assert error_of(429, {"detail": "slow down", "code": "rate_limit_exceeded"}).code == "rate_limit_exceeded"
    assert error_of(502, None).message == "HTTP 502"


def test_path_parts_are_quoted_whole() -> None:
    assert quote("a/b c?d#e") == "a%2Fb%20c%3Fd%23e"


def test_the_key_never_reaches_an_error_string_or_a_repr() -> None:
    with pytest.raises(ConfigError) as info:
        Transport("http://127.0.0.1:9", "bad key\nX-Evil: 1", naming=peer_naming(), follow_redirects=True)
    assert "bad key" not in str(info.value) and "Evil" not in str(info.value)

    async def go() -> list[str]:
        peer = PeerClient(Peer("spark", f"http://127.0.0.1:{free_port()}", "", KEY), "research")
        shown = [repr(peer), repr(peer._http)]
        try:
            await peer.bot_chat()
        except PeerError as exc:
            shown += [str(exc), repr(exc), exc.message]
        finally:
            await peer.aclose()
        return shown

    shown = asyncio.run(go())
    assert len(shown) == 5, "the unreachable peer raised"
    assert all(KEY not in text and "Bearer" not in text for text in shown), shown
    assert "peer 'spark' at http://127.0.0.1:" in shown[2] and "/p/research" in shown[2]


def test_the_local_client_names_the_gateway_and_follows_no_redirect() -> None:
    async def elsewhere(n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(answer(200, b'{"gateway_id": "gw"}'))
        return True

    async def go() -> None:
        async with serve(elsewhere) as (other_url, other_seen):

            async def redirect(n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
                writer.write(answer(307, b"", f"Location: {other_url}/v1/capabilities"))
                return True

            async with serve(redirect) as (url, seen):
                client = GatewayClient(url, KEY)
                try:
                    with pytest.raises(GatewayError):
                        await client.request("GET", "/v1/capabilities")
                    assert not await client.probe("gwi-x")
                finally:
                    await client.aclose()
                assert len(seen) == 2 and not other_seen, "the redirect was not followed"

        closed = GatewayClient(f"http://127.0.0.1:{free_port()}", KEY)
        try:
            with pytest.raises(GatewayError) as info:
                await closed.request("GET", "/health")
            assert str(info.value).startswith("could not reach the gateway at http://127.0.0.1:")
            assert info.value.code == "gateway_error"
        finally:
            await closed.aclose()

    asyncio.run(go())


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def test_peer_events_arrive_as_the_stream_goes_and_a_broken_stream_may_have_been_sent() -> None:
    frames = [b": keepalive\n\n", b'data: {"event": "run.started"}\n\ndata: {"ev', b'ent": "message.delta"}\r\n\r\n']

    def stream(end: bytes) -> Handle:
        async def handle(n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for frame in frames:
                writer.write(_chunk(frame))
                await writer.drain()
                await asyncio.sleep(0.01)
            writer.write(end)
            return False

        return handle

    async def follow(end: bytes) -> tuple[list[str], BaseException | None]:
        got: list[str] = []
        async with serve(stream(end)) as (url, _):
            client = PeerClient(Peer("spark", url, "", KEY))
            try:
                async for event in client.events("run_1"):
                    got.append(event.name)
            except PeerError as exc:
                return got, exc
            finally:
                await client.aclose()
        return got, None

    clean, error = asyncio.run(follow(_chunk(b'data: {"event": "run.completed"}') + b"0\r\n\r\n"))
    assert (clean, error) == (["run.started", "message.delta", "run.completed"], None)

    broken, error = asyncio.run(follow(b"40\r\ndata: {"))
    assert broken == ["run.started", "message.delta"]
    assert isinstance(error, PeerOutcomeUnknown), error


def test_the_gateways_error_answers_arrive_as_the_class_their_status_names() -> None:
    """The CLI's exit code follows from the error's class: 2 for the caller's doing (400, 403, 404, 409, 413),
    1 for the rest; the gateway's code, message and run id are kept."""
    answers = {
        "/404": (404, {"error": {"message": "no run r1", "code": "not_found", "run_id": "r1", "path": "/x"}}),
        "/403": (403, {"error": {"message": "not yours", "code": "forbidden"}}),
        "/403b": (403, {"error": {"message": "not allowed to", "code": "not_allowed"}}),
        "/429": (429, {"error": {"message": "queue full", "code": "queue_full"}}),
        "/424": (424, {"error": {"message": "the run failed", "code": "run_failed", "run_id": "r2"}}),
    }

    async def handle(n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        path = head.split(b" ")[1].decode()
        status, body = answers[path]
        writer.write(answer(status, json.dumps(body).encode(), "Retry-After: 0"))
        return True

    async def go() -> dict[str, BackchannelError]:
        got: dict[str, BackchannelError] = {}
        async with serve(handle) as (url, _):
            client = GatewayClient(url, KEY)
            try:
                for path in answers:
                    with pytest.raises(BackchannelError) as info:
                        await client.request("GET", path)
                    got[path] = info.value
            finally:
                await client.aclose()
        return got

    got = asyncio.run(go())
    assert isinstance(got["/404"], NotFound) and got["/404"].exit_code == 2
    assert (got["/404"].code, got["/404"].message, got["/404"].details) == ("not_found", "no run r1", {"run_id": "r1"})
    assert isinstance(got["/403"], Forbidden) and isinstance(got["/403b"], Refused)
    assert got["/403b"].code == "not_allowed" and got["/403b"].exit_code == 2
    assert (got["/429"].exit_code, got["/429"].http_status, got["/429"].code) == (1, 429, "queue_full")
    assert (got["/424"].exit_code, got["/424"].details) == (1, {"run_id": "r2"})


def test_the_probe_asks_health_without_the_key_and_refuses_a_gateway_of_another_version() -> None:
    """The gateway is found by `/health` alone, asked with no key: the instance its runtime file names, of this
    command's version; a gateway of another version (still running after an upgrade) is refused: restart it."""
    version = {"value": __version__}

    async def handle(n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        own = {"instance": "gwi-1", "version": version["value"]}
        writer.write(answer(200, json.dumps({"status": "ok", "platform": "hermes-agent", "backchannel": own}).encode()))
        return True

    async def go() -> tuple[bool, bool, list[bytes]]:
        async with serve(handle) as (url, seen):
            client = GatewayClient(url, KEY)
            try:
                other = await client.probe("gwi-2")
                ours = await client.probe("gwi-1")
                version["value"] = "0.0.0-earlier"
                with pytest.raises(GatewayError, match="restart the gateway"):
                    await client.probe("gwi-1")
            finally:
                await client.aclose()
        return other, ours, seen

    other, ours, seen = asyncio.run(go())
    assert (other, ours) == (False, True)
    assert [h.split(b" ")[1] for h in seen] == [b"/health"] * 3
    assert not any(KEY.encode() in h for h in seen), "the key went out before the gateway was named"
