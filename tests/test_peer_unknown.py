"""A peer that takes the message and drops the answer: the outcome is unknown, never "not delivered",
and the CLI prints the key that asks again safely."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import run_cli


class DroppingPeer:
    """A gateway-like server on loopback that lists a Bot Chat and cuts every chat request after reading it."""

    def __init__(self) -> None:
        self.port = 0
        self.chats = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        line = head.split("\r\n", 1)[0]
        length = next((int(h.split(":")[1]) for h in head.split("\r\n") if h.lower().startswith("content-length")), 0)
        if length:
            await reader.readexactly(length)
        if line.startswith("POST") and "/chat" in line:
            self.chats += 1
            writer.close()  # the message arrived; its answer never leaves
            return
        if line.startswith("GET /health"):  # a gateway's /health, as Hermes answers it (peer add asks)
            body, status = json.dumps({"status": "ok", "platform": "hermes-agent"}).encode(), "200 OK"
        elif line.startswith("GET /api/sessions"):
            body = json.dumps({"object": "list", "data": [{"id": "s-bot", "title": "Bot Chat"}]}).encode()
            status = "200 OK"
        else:
            body, status = b'{"error": {"message": "no", "type": "x", "code": "not_found"}}', "404 Not Found"
        # Connection: close, so no request rides a connection this server already closed: each one arrives.
        head_out = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        writer.write((head_out + "Connection: close\r\n\r\n").encode() + body)
        await writer.drain()
        writer.close()

    def __enter__(self) -> DroppingPeer:
        self._thread.start()
        self._ready.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


@pytest.fixture
def dropping() -> Iterator[DroppingPeer]:
    with DroppingPeer() as peer:
        yield peer


def test_a_dropped_answer_is_unknown_with_the_key_to_ask_again(initialised: Path, dropping: DroppingPeer) -> None:
    added = run_cli("peer", "add", "flaky", "--url", f"http://127.0.0.1:{dropping.port}", "--key", "flaky-key-123")
    assert added.exit_code == 0, added.stderr
    result = run_cli("peer", "dm", "flaky", "did you get this?", "--json")
    assert result.exit_code == 1, (result.stdout, result.stderr)
    body = json.loads(result.stdout)
    assert body["result"] == "unknown" and body["idempotency_key"], body
    assert "--idempotency-key " + body["idempotency_key"] in result.stderr
    assert "unreachable" not in result.stderr
    assert dropping.chats == 1  # sent once: a peer that cannot deduplicate is not asked again blindly
    entries = [e for e in json.loads(run_cli("ledger", "peer:flaky", "--json").stdout)]
    assert [e["state"] for e in entries] == ["unknown"], entries
