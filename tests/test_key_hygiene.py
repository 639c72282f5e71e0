"""Key hygiene (DESIGN 5 "Secrets", issue 15 items 4 and 5): the CLI sends the person's key only to a port whose
`/health` names the instance this home's runtime file records; a peer key is visible ASCII or refused at
`peer add`; no key reaches the CLI's output, the gateway log, the store or /v1/ledger."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from backchannel.home import config
from conftest import GatewayThread, api_key, free_port, run_cli

NON_ASCII_KEY = "sk-caf\u00e9-\u2603-secret-value"


@contextmanager
def fake_server(answer: dict[str, Any], *, status: int = 200) -> Iterator[tuple[int, list[dict[str, str]]]]:
    """A server on a free loopback port answering every request with `answer`; yields (port, headers seen)."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()} | {":path": self.path})
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            body = json.dumps(answer).replace("ECHO", self.headers.get("authorization", "")).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()


def set_port(root: Path, port: int) -> None:
    path = config.config_path(root)
    data = config.load_yaml(path)
    data["gateway"]["port"] = port
    config.write_yaml(path, data)


def test_the_cli_never_sends_the_key_to_a_stranger_on_the_gateways_port(initialised: Path) -> None:
    key = api_key(initialised)
    health = {"status": "ok", "platform": "backchannel", "version": "9", "instance": "gwi-stolen"}
    with fake_server(health) as (port, seen):
        set_port(initialised, port)
        sent = run_cli("send", "default", "hello", "--json")  # no gateway runs: the stranger is not asked
        assert sent.exit_code == 0, sent
        assert json.loads(sent.stdout)["via"] == "local"
        # a runtime file left behind, naming a live process (this one) and another instance
        record = {"pid": os.getpid(), "host": "127.0.0.1", "port": port, "gateway_id": "x", "started_at": 0}
        (initialised / "gateway.json").write_text(json.dumps({**record, "instance": "gwi-mine"}))
        sent = run_cli("send", "default", "hello again", "--json")
        assert sent.exit_code == 0 and json.loads(sent.stdout)["via"] == "local", sent
        (initialised / "gateway.json").unlink()
    assert [h[":path"] for h in seen] == ["/health"], seen  # only asked who it is, once
    assert not any("authorization" in h for h in seen) and key not in json.dumps(seen)


def test_the_cli_finds_its_own_gateway_by_the_instance_in_health(initialised: Path) -> None:
    gw = GatewayThread(initialised, free_port())
    set_port(initialised, gw.port)
    gw.start()
    try:
        runtime = json.loads((initialised / "gateway.json").read_text())
        assert runtime["instance"].startswith("gwi-")
        assert httpx.get(gw.url + "/health").json()["backchannel"]["instance"] == runtime["instance"]
        sent = run_cli("send", "default", "hello", "--json")
        assert sent.exit_code == 0 and json.loads(sent.stdout)["via"] == "gateway", sent
    finally:
        gw.close()


def test_a_non_ascii_peer_key_is_refused_at_peer_add_and_never_shown(initialised: Path) -> None:
    for how in (("--key", NON_ASCII_KEY), ()):
        added = run_cli("peer", "add", "spark", "--url", "http://127.0.0.1:9", *how, input=NON_ASCII_KEY + "\n")
        assert added.exit_code == 2, added
        assert "visible ASCII" in added.stderr and "Traceback" not in added.stderr
        assert NON_ASCII_KEY not in added.stdout + added.stderr and "caf" not in added.stderr
    assert "spark" not in config.load_yaml(config.config_path(initialised)).get("peers", {})
    assert NON_ASCII_KEY not in config.env_path(initialised).read_text()


@pytest.mark.sqlite  # reads state.db for the key
def test_a_peer_key_never_reaches_the_output_the_log_the_store_or_the_ledger(initialised: Path) -> None:
    peer_key = "pk-" + "s3cr3t" * 4
    # A peer's own words about our key are shown (scrubbed of it) unless they are a gateway's stock invalid_api_key.
    answer = {"error": {"message": "bad key ECHO", "type": "invalid_request_error", "code": "unauthorized"}}
    with fake_server(answer, status=401) as (port, seen):
        added = run_cli("peer", "add", "spark", "--url", f"http://127.0.0.1:{port}", "--key", peer_key)
        assert added.exit_code == 0, added
        gw = GatewayThread(initialised, free_port())
        set_port(initialised, gw.port)
        gw.start()
        try:
            dm = run_cli("peer", "dm", "spark", "hello", "--json")
            assert dm.exit_code == 1, dm
            path = initialised / "profiles" / "default" / "config.yaml"
            data = config.load_yaml(path)
            data["agent"]["session_messaging"]["allow"] = ["peer:*"]
            config.write_yaml(path, data)
            agent = run_cli("send", "default", "/peer spark hi from the agent", "--json")
            ledger = httpx.get(gw.url + "/v1/ledger", headers=gw.headers()).text
            runs = run_cli("runs", "list", "--json").stdout
        finally:
            gw.close()
    assert any(h.get("authorization") == f"Bearer {peer_key}" for h in seen)  # it was sent, to the peer only
    shown = dm.stdout + dm.stderr + agent.stdout + agent.stderr + ledger + runs + gw.log() + added.stdout
    assert "bad key" in shown and peer_key not in shown
    stored = b"".join(p.read_bytes() for p in initialised.glob("state.db*"))
    assert peer_key.encode() not in stored
