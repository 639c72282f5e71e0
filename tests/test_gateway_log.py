"""The gateway's log as an operator reads it: one format for every line, the libraries' lines too, and a stop
that cuts a turn says which run will run again."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import httpx

from backchannel.home import config
from conftest import GatewayProcess, free_port

LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+ \S")


def _gateway(root: Path, *, grace: float) -> GatewayProcess:
    gw = GatewayProcess(root, free_port())
    data = config.load_yaml(config.config_path(root))
    data["gateway"] = {**data["gateway"], "port": gw.port}
    config.write_yaml(config.config_path(root), data)
    return gw.start(grace=grace)


def test_every_line_of_the_gateway_log_has_the_gateways_format(initialised: Path) -> None:
    gw = _gateway(initialised, grace=1)
    try:
        with socket.create_connection(("127.0.0.1", gw.port)) as raw:  # uvicorn's own warning
            raw.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            raw.recv(100)
        mcp = httpx.post(  # MCP's session manager logs a line of its own for a new session
            f"{gw.url}/mcp",
            headers={**gw.headers(), "Accept": "application/json, text/event-stream"},
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-03-26",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            },
            timeout=10,
        )
        assert mcp.status_code == 200, mcp.text
        deadline = time.monotonic() + 10
        while "Invalid HTTP request" not in gw.log():
            assert time.monotonic() < deadline, gw.log()
            time.sleep(0.05)
    finally:
        assert gw.terminate() == 0
    lines = gw.log().splitlines()
    assert any("mcp." in line for line in lines), lines
    assert [line for line in lines if not LINE.match(line)] == []


def test_sigterm_with_a_turn_running_logs_the_run_that_runs_again(initialised: Path) -> None:
    gw = _gateway(initialised, grace=0.2)
    with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=10) as c:
        started = c.post("/v1/runs", json={"input": "/sleep 5\ncut by the stop"})
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        deadline = time.monotonic() + 10
        while c.get(f"/v1/runs/{run_id}").json()["status"] != "running":
            assert time.monotonic() < deadline, "the turn never started"
            time.sleep(0.05)
    assert gw.terminate() == 0
    said = [line for line in gw.log().splitlines() if run_id in line and "requeued at shutdown" in line]
    assert len(said) == 1 and "runs again on the next start" in said[0], gw.log()
