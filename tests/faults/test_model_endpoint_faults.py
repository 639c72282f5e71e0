"""An openai model endpoint that is down, hangs, answers HTML, or streams half a reply and closes.

Each gives the run a clear failure (code `engine_error`) whose error names the endpoint, within the
profile's configured timeout, never a traceback, and never a half reply stored as if it were whole.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from backchannel.home import config
from bad_servers import RawServer, SilentPeer
from conftest import free_port, run_cli
from gateway_http import TERMINAL, client, gateway_with, poll
from store_audit import audit_key

pytestmark = pytest.mark.faults

TIMEOUT = 1.0  # the profile's model.timeout_seconds


def _answer(status: str, kind: str, body: bytes) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


HTML = _answer("200 OK", "text/html", b"<html><body>Welcome to nginx!</body></html>")
HTML_502 = _answer("502 Bad Gateway", "text/html", b"<html><h1>502 Bad Gateway</h1></html>")
_CHUNK = {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "Half of a"}}]}
_EVENT = b"data: " + json.dumps(_CHUNK).encode() + b"\n\n"
HALF_STREAM = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + _EVENT
)  # then the connection closes: no finish_reason, no [DONE]
HALF_CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    + f"{len(_EVENT):x}\r\n".encode()
    + _EVENT
    + b"\r\n"
)  # a chunked body cut before its last chunk


@contextlib.contextmanager
def endpoint(kind: str) -> Iterator[str]:
    """The base URL of an endpoint that fails in the named way."""
    if kind == "down":
        yield f"http://127.0.0.1:{free_port()}/v1"
    elif kind == "hangs":
        with SilentPeer() as silent:
            yield silent.url + "/v1"
    else:
        answer = {"html": HTML, "html_502": HTML_502, "half_stream": HALF_STREAM, "half_chunked": HALF_CHUNKED}[kind]
        with RawServer(answer) as server:
            yield server.url + "/v1"


@pytest.mark.parametrize("kind", ["down", "hangs", "html", "html_502", "half_stream", "half_chunked"])
def test_a_failing_model_endpoint_fails_the_run_clearly_within_its_timeout(initialised: Path, kind: str) -> None:
    with endpoint(kind) as url:
        made = run_cli("profile", "create", "coder", "--engine", "openai", "--base-url", url, "--model", "m")
        assert made.exit_code == 0, made.stderr
        path = initialised / "profiles" / "coder" / "config.yaml"
        data = config.load_yaml(path)
        data["model"]["timeout_seconds"] = TIMEOUT
        config.write_yaml(path, data)
        with gateway_with(initialised) as gw, client(gw) as c:
            sid = c.post("/p/coder/api/sessions", json={"title": kind}).json()["session"]["id"]
            started = time.monotonic()
            answer = c.post(
                f"/p/coder/api/sessions/{sid}/chat",
                json={"message": "are you there?"},
                headers={"Idempotency-Key": f"model-{kind}", "X-Hermes-Wait-Seconds": "10"},
            )
            body = answer.json()
            run_id = body.get("run_id") or body["error"]["run_id"]
            run = poll(c, run_id, TERMINAL, within=TIMEOUT + 5)
            took = time.monotonic() - started
            log = gw.log()
        assert run["status"] == "failed", run
        error = json.dumps(run)
        assert url in error and "coder" in error, run  # the error names the endpoint and the profile
        assert took < TIMEOUT + 3, f"the run failed after {took:.1f}s; the timeout is {TIMEOUT}s"
        assert "Traceback" not in log, log
        audited = audit_key(initialised, f"model-{kind}", state="failed")
        assert audited.run["error_code"] == "engine_error", audited.run
        assert not audited.run["reply"], audited.run  # half a reply is not kept as the reply
