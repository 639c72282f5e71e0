"""The POST of a push notification (`net.webhook.Webhooks`) against real receivers on loopback: what it sends,
that a redirect is an answer (never followed), that a refusing receiver is read only as far as a short detail,
the timeout of the whole POST and the shorter one of its connection, a receiver not there, and a name whose
addresses the home refuses."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from backchannel.errors import PushFailed
from backchannel.home.push_settings import PushSettings
from backchannel.net.screening import Screen
from backchannel.net.webhook import DETAIL_BYTES, USER_AGENT, Answer, Webhooks
from conftest import free_port

LONG = b"x" * (DETAIL_BYTES * 50)


class Handler(BaseHTTPRequestHandler):
    got: list[tuple[str, dict[str, str], bytes]]

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.got.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        route = self.path.partition("?")[0]
        if route == "/redirect":
            self.send_response(307)
            self.send_header("Location", "/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif route == "/refuse":
            self.send_response(429)
            self.send_header("Retry-After", "3")
            self.send_header("Content-Length", str(len(LONG)))
            self.end_headers()
            self.wfile.write(LONG)
        elif route == "/slow":
            time.sleep(2)
        else:
            self.send_response(204)
            self.end_headers()


@pytest.fixture
def server() -> Iterator[tuple[str, list[tuple[str, dict[str, str], bytes]]]]:
    got: list[tuple[str, dict[str, str], bytes]] = []
    handler = type("Kept", (Handler,), {"got": got})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", got
    finally:
        httpd.shutdown()
        httpd.server_close()


def post(url: str, *, allow_private: bool = True, timeout: float = 5.0, connect_timeout: float | None = None) -> Answer:
    async def once() -> Answer:
        screen = Screen(PushSettings(push_allow_private=allow_private))
        hooks = Webhooks(screen, timeout=timeout, connect_timeout=connect_timeout)
        try:
            return await hooks.post(url, b'{"n": 1}', {"Content-Type": "application/json", "X-A2A-Token": "t"})
        finally:
            await hooks.aclose()

    return asyncio.run(once())


def test_the_body_and_headers_go_as_given_and_a_2xx_is_ok(server: tuple[str, list]) -> None:
    base, got = server
    answer = post(f"{base}/hook?secret=1")
    assert answer.ok and answer.status == 204 and answer.detail == "", answer
    ((path, headers, body),) = got
    assert path == "/hook?secret=1" and body == b'{"n": 1}'
    assert headers["content-type"] == "application/json" and headers["x-a2a-token"] == "t"
    assert headers["user-agent"] == USER_AGENT and "authorization" not in headers


def test_a_redirect_is_an_answer_and_never_followed(server: tuple[str, list]) -> None:
    base, got = server
    answer = post(f"{base}/redirect")
    assert answer.status == 307 and not answer.ok, answer
    assert [p for p, _, _ in got] == ["/redirect"]  # /elsewhere never asked


def test_a_refusing_receiver_is_read_only_as_far_as_a_short_detail(server: tuple[str, list]) -> None:
    base, _ = server
    answer = post(f"{base}/refuse")
    assert answer.status == 429 and answer.retry_after == 3.0, answer
    assert answer.detail == "x" * DETAIL_BYTES


def test_a_receiver_that_does_not_answer_within_the_timeout_is_a_push_failure(server: tuple[str, list]) -> None:
    base, _ = server
    with pytest.raises(PushFailed, match=r"the receiver 'http://127\.0\.0\.1:\d+/slow' did not answer within 0\.5s"):
        post(f"{base}/slow?secret=hidden", timeout=0.5)


def test_a_receiver_that_takes_no_connection_fails_within_the_connect_timeout_not_the_posts() -> None:
    """A listener whose backlog is full: the connection is never made (the kernel drops the handshake)."""
    with socket.create_server(("127.0.0.1", 0), backlog=0) as full, socket.create_connection(full.getsockname()):
        url = f"http://127.0.0.1:{full.getsockname()[1]}/hook"
        began = time.monotonic()
        with pytest.raises(PushFailed, match=r"the receiver 'http://127\.0\.0\.1:\d+/hook'"):
            post(url, timeout=120.0, connect_timeout=0.2)
        assert time.monotonic() - began < 5  # the connect timeout's (a transport's own is 10 s, the POST's 120 s)


def test_a_receiver_not_there_is_a_push_failure_naming_it() -> None:
    url = f"http://127.0.0.1:{free_port()}/hook?secret=hidden"
    with pytest.raises(PushFailed, match=r"could not reach the receiver 'http://127\.0\.0\.1:\d+/hook'") as info:
        post(url)
    assert "hidden" not in str(info.value)


def test_a_name_is_screened_when_the_connection_is_made(server: tuple[str, list]) -> None:
    base, got = server
    port = base.rpartition(":")[2]
    with pytest.raises(PushFailed, match=r"leads to 'localhost', and \S+ is a loopback address"):
        post(f"http://localhost:{port}/hook", allow_private=False)
    with pytest.raises(PushFailed, match=r"leads to '127\.0\.0\.1', and 127\.0\.0\.1 is a loopback address"):
        post(f"{base}/hook", allow_private=False)
    assert got == []  # nothing was sent
    assert post(f"http://localhost:{port}/hook").ok  # allowed: the same name reaches the receiver
