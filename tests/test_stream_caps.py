"""Streams and connections no peer's key can take all of (issue 38 item 3): a key, a run and the peers together
hold at most so many open streams (429 too_many_streams past a bound, naming it, on every streaming surface,
before anything is handed in), and a flood of connections never shuts the person out. Real gateways on
loopback, real keys, raw sockets where a connection is what is counted."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from conftest import GatewayThread
from gateway_http import gateway_with
from test_trust_keys import as_key, bot_chat, ledger, make_key, person

A2A_V1 = {"A2A-Version": "1.0"}
STREAM_TIMEOUT = httpx.Timeout(30.0)
FREED_WITHIN = 60.0  # seconds for a closed stream's place to come back: a bound on a hang, not a budget


def start_run(c: httpx.Client, text: str) -> str:
    r = c.post("/v1/runs", json={"input": f"/sleep 300\n{text}"})
    assert r.status_code == 202, r.text
    return str(r.json()["run_id"])


def opened(held: contextlib.ExitStack, c: httpx.Client, method: str, path: str, **kw: Any) -> httpx.Response:
    """A streamed request, its head read and the stream held open until `held` closes."""
    return held.enter_context(c.stream(method, path, timeout=STREAM_TIMEOUT, **kw))


def refused(r: httpx.Response, bound: str) -> dict[str, Any]:
    """A 429 too_many_streams in the one error envelope that names `bound`, with Retry-After, its connection
    let go; its envelope."""
    assert r.status_code == 429, (r.status_code, r.headers)  # before its body: an open stream's never ends
    r.read()
    error: dict[str, Any] = r.json()["error"]
    assert error["code"] == "too_many_streams" and error["type"] == "rate_limit_error", error
    assert bound in error["message"], error
    assert int(r.headers["retry-after"]) > 0 and r.headers["connection"] == "close", r.headers
    return error


def a2a_message(text: str, message_id: str) -> dict[str, Any]:
    return {"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}}


def error_info(error: dict[str, Any], key: str) -> dict[str, Any]:
    info: dict[str, Any] = error[key][0]
    return info


def test_a_peer_keys_streams_are_bounded_by_key_and_by_run_on_every_streaming_surface(initialised: Path) -> None:
    with gateway_with(initialised, max_streams_per_key=3, max_streams_per_run=2) as gw:
        key = make_key("spark")
        with as_key(gw, key) as peer, person(gw) as p, contextlib.ExitStack() as held:
            first, second = start_run(peer, "first"), start_run(peer, "second")
            sid = bot_chat(peer)
            follows = [opened(held, peer, "GET", f"/v1/runs/{first}/events") for _ in range(2)]
            assert [r.status_code for r in follows] == [200, 200]
            refused(opened(held, peer, "GET", f"/v1/runs/{first}/events"), "gateway.max_streams_per_run 2")
            assert opened(held, peer, "GET", f"/v1/runs/{second}/events").status_code == 200

            # The key holds 3: each streaming surface refuses it the next, in its own shape, and hands nothing in.
            refused(opened(held, peer, "GET", f"/v1/runs/{second}/events"), "gateway.max_streams_per_key 3")
            chat = opened(held, peer, "POST", f"/api/sessions/{sid}/chat/stream", json={"message": "never in, chat"})
            refused(chat, "gateway.max_streams_per_key 3")
            rpc = opened(
                held,
                peer,
                "POST",
                "/a2a/jsonrpc",
                json={
                    "jsonrpc": "2.0",
                    "id": 7,
                    "method": "SendStreamingMessage",
                    "params": a2a_message("never in, a2a", "m-cap-1"),
                },
                headers=A2A_V1,
            )
            assert rpc.status_code == 429 and rpc.headers["retry-after"], rpc.headers
            rpc.read()
            info = error_info(rpc.json()["error"], "data")
            assert info["metadata"]["code"] == "too_many_streams" and info["metadata"]["retryAfter"], info
            assert "gateway.max_streams_per_key 3" in rpc.json()["error"]["message"], rpc.text
            rest = opened(
                held, peer, "POST", "/a2a/rest/message:stream", json=a2a_message("never in, rest", "m-cap-2"),
                headers=A2A_V1,
            )  # fmt: skip
            assert rest.status_code == 429, rest.headers
            rest.read()
            assert rest.json()["error"]["status"] == "RESOURCE_EXHAUSTED", rest.text
            assert error_info(rest.json()["error"], "details")["metadata"]["code"] == "too_many_streams", rest.text
            subscribe = opened(held, peer, "POST", f"/a2a/rest/tasks/{second}:subscribe", headers=A2A_V1)
            assert subscribe.status_code == 429, subscribe.headers

            # The person's streams are not counted, on the run the peers filled too.
            assert [opened(held, p, "GET", f"/v1/runs/{first}/events").status_code for _ in range(4)] == [200] * 4

            # A stream that ends gives its place back (once the gateway has seen its reader leave).
            follows[0].close()
            deadline = time.monotonic() + FREED_WITHIN
            while True:
                with peer.stream("GET", f"/v1/runs/{first}/events", timeout=STREAM_TIMEOUT) as again:
                    if again.status_code == 200:
                        break
                    refused(again, "gateway.max_streams_per")
                assert time.monotonic() < deadline, "a closed stream's place did not come back"
                time.sleep(0.05)
            assert not [e for e in ledger(p) if str(e.get("message", "")).startswith("never in")], ledger(p)
            for run in (first, second):
                p.post(f"/v1/runs/{run}/stop")


def raw_stream(port: int, path: str, key: str) -> tuple[int, socket.socket]:
    """A GET of `path` with `key` on a connection of its own, left open: the answer's status and the socket."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\r\n".encode())
    head = b""
    while b"\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
    return int(head.split(b" ", 2)[1]), sock


@contextlib.contextmanager
def sockets() -> Iterator[list[socket.socket]]:
    kept: list[socket.socket] = []
    try:
        yield kept
    finally:
        for sock in kept:
            sock.close()


def test_a_peers_flood_of_streams_and_connections_never_shuts_the_person_out(initialised: Path) -> None:
    """The issue's case, scaled down: one peer's key opens more streams, then more bare connections, than the
    gateway takes. The peers' streams stop `reserved_connections` short of `max_connections` (429 naming both);
    the connections fill the cap (503 for the peer); the person's requests are served all along."""
    settings = {"max_connections": 24, "reserved_connections": 8, "max_streams_per_key": 100}
    with gateway_with(initialised, **settings, max_streams_per_run=100, header_timeout_seconds=600) as gw:
        assert isinstance(gw, GatewayThread)
        key = make_key("flood")
        with as_key(gw, key) as peer:
            run_id = start_run(peer, "followed by a flood")
        with sockets() as flood:
            statuses = []
            for _ in range(30):
                status, sock = raw_stream(gw.port, f"/v1/runs/{run_id}/events", key)
                statuses.append(status)
                flood.append(sock)
            assert statuses == [200] * 16 + [429] * 14, statuses  # the peers' share: 24 less the 8 kept
            with as_key(gw, key) as c, c.stream("GET", f"/v1/runs/{run_id}/events", timeout=STREAM_TIMEOUT) as r:
                refused(r, "gateway.max_connections 24 less gateway.reserved_connections 8")
            for _ in range(40):  # more connections than the cap and the person's places together
                flood.append(socket.create_connection(("127.0.0.1", gw.port), timeout=30))

            status, sock = raw_stream(gw.port, f"/v1/runs/{run_id}", key)
            sock.close()
            assert status == 503, status  # the cap stands for everyone else
            with person(gw) as p:
                for _ in range(3):
                    r = p.get(f"/v1/runs/{run_id}")
                    assert r.status_code == 200 and r.json()["status"] in ("queued", "running"), r.text
                sid = p.post("/api/sessions", json={"title": "the person's own"}).json()["session"]["id"]
                chat = p.post(f"/api/sessions/{sid}/chat", json={"message": "still here"})
                assert chat.status_code == 200 and chat.json()["message"]["content"].endswith("still here"), chat.text
        with person(gw) as p:
            p.post(f"/v1/runs/{run_id}/stop")
