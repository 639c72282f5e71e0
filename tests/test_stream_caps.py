"""Streams no peer's key can take all of (issue 38 item 3): a key, a run and the peers together hold at most so
many open streams (429 too_many_streams past a bound, naming it, on every streaming surface, before anything
is handed in). Real gateways on loopback, real keys."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import httpx

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
