"""Limits at the door no sender can exhaust: a request head's size, header count and time, a body's time
(DESIGN 5 "Limits", issue 15 item 7). Raw sockets on loopback against a real gateway process."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import httpx

from conftest import api_key
from gateway_http import gateway_with


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    return sock


def answer(sock: socket.socket) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of the answer, read until the gateway closes the connection."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)


def test_a_head_too_big_or_with_too_many_headers_is_431_and_the_connection_closed(initialised: Path) -> None:
    with gateway_with(initialised, max_header_bytes=16_384, max_headers=20) as gw:
        sock = connect(gw.port)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ")
        sent = 0
        try:
            while sent < 50_000_000:  # the gateway closes long before: nothing near this is ever read
                sock.sendall(b"a" * 65536)
                sent += 65536
        except OSError:
            pass
        status, body = answer(sock)
        assert status == 431 and body["error"]["code"] == "header_too_large", body
        assert sent < 5_000_000, sent

        many = b"".join(b"X-H%d: v\r\n" % i for i in range(25))
        sock = connect(gw.port)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n")
        status, body = answer(sock)
        assert status == 431 and body["error"]["code"] == "too_many_headers", body

        ok = httpx.get(gw.url + "/health", headers={f"X-H{i}": "v" for i in range(10)})
        assert ok.status_code == 200
        big_body = httpx.post(gw.url + "/api/sessions", json={"title": "t", "pad": "p" * 500_000}, headers=gw.headers())
        assert big_body.status_code == 201, big_body.text  # a body is not a head: only max_body_bytes bounds it


def test_a_head_or_a_body_that_trickles_in_is_cut_off_with_408(initialised: Path) -> None:
    with gateway_with(initialised, header_timeout_seconds=1, body_timeout_seconds=1) as gw:
        slow_head = connect(gw.port)
        slow_head.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        for _ in range(4):
            time.sleep(0.4)
            try:
                slow_head.sendall(b"X-Slow: 1\r\n")
            except OSError:
                break
        status, body = answer(slow_head)
        assert status == 408 and body["error"]["code"] == "request_timeout", body  # before its head was done

        silent = connect(gw.port)  # connects and says nothing
        status, body = answer(silent)
        assert status == 408, body

        slow_body = connect(gw.port)
        key = api_key(initialised).encode()
        slow_body.sendall(
            b"POST /api/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key + b"\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"title": '
        )
        status, body = answer(slow_body)
        assert status == 408 and body["error"]["code"] == "request_timeout", body
        sessions = httpx.get(gw.url + "/api/sessions", headers=gw.headers()).json()["data"]
        assert sessions == []
