"""The peer client's transport rules: the key never follows a redirect to another origin."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli


class _Recorder(BaseHTTPRequestHandler):
    seen: list[dict[str, str]]
    redirect_to: str | None

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        self.seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
        if self.redirect_to:
            self.send_response(307)
            self.send_header("Location", self.redirect_to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"object": "list", "data": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer


def _serve(redirect_to: str | None) -> tuple[ThreadingHTTPServer, list[dict[str, str]]]:
    seen: list[dict[str, str]] = []
    handler = type("Handler", (_Recorder,), {"seen": seen, "redirect_to": redirect_to})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


@pytest.fixture
def servers() -> Iterator[tuple[str, list[dict[str, str]], list[dict[str, str]]]]:
    other, other_seen = _serve(None)
    # "localhost" and "127.0.0.1" are different origins, even on one machine
    first, first_seen = _serve(f"http://localhost:{other.server_address[1]}")
    try:
        yield f"http://127.0.0.1:{first.server_address[1]}", first_seen, other_seen
    finally:
        first.shutdown()
        other.shutdown()


def test_the_key_is_not_sent_on_to_another_origin(initialised: Path, servers: Any) -> None:
    url, first_seen, other_seen = servers
    assert run_cli("peer", "add", "hop", "--url", url, "--key", "secret-peer-key-123").exit_code == 0
    run_cli("peer", "dm", "hop", "hello")
    assert first_seen and all(h.get("authorization") == "Bearer secret-peer-key-123" for h in first_seen)
    assert other_seen, "the redirect was followed"
    assert all("authorization" not in h for h in other_seen)
