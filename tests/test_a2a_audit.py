"""Breaks the security audit found at the A2A endpoints, each closed: a malformed parameter of 1 MB logged in
full with the SDK's traceback (any peer key could flood the log), and bad requests that cost a peer nothing
of its rate (audit break 3); an unknown profile's card listing every profile's name to anyone, and an A2A
error answered in the gateway's REST shape on JSON-RPC (audit break 6; the 413 case is in test_a2a_server).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from a2a_client import V1, ledger, make_key
from backchannel.a2a_extension import URI
from conftest import GatewayProcess, api_key, run_cli
from gateway_http import gateway_with, in_home

BIG = 900_000  # characters of one malformed parameter (the request stays within the 1 MiB body limit)
RATE = 3  # gateway.max_runs_per_sender_per_minute for these tests


def _post(gw: GatewayProcess, key: str, params: dict[str, Any], method: str = "SendMessage") -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", **V1}
    return httpx.post(f"{gw.url}/a2a/jsonrpc", content=json.dumps(body), headers=headers, timeout=30, trust_env=False)


def _malformed(n: int) -> dict[str, Any]:
    """A message whose `parts` is a 900 kB string, not a list: the SDK cannot read it."""
    return {"message": {"messageId": f"m-bad-{n}", "role": "ROLE_USER", "parts": "A" * BIG}}


def _log_size(gw: GatewayProcess) -> int:
    assert gw.log_path is not None
    return gw.log_path.stat().st_size


def test_a_malformed_parameter_is_one_bounded_log_line_and_a_bounded_answer(initialised: Path) -> None:
    with gateway_with(initialised, max_runs_per_sender_per_minute=100) as gw:
        key = make_key(gw.root, "flooder")
        _post(gw, key, {"id": "warm-up"}, "GetTask")  # the SDK loads (its import logs nothing of a request)
        before = _log_size(gw)
        for n in range(5):
            r = _post(gw, key, _malformed(n))
            error = r.json()["error"]
            assert error["code"] == -32602 and len(r.content) < 4_000, len(r.content)  # not echoed back in full
        grown = gw.log().encode()[before:].decode()
        lines = [line for line in grown.splitlines() if line.strip()]
    assert len(lines) == 5 and all("A2A bad request from peer:flooder" in line for line in lines), lines
    assert all(len(line) < 600 for line in lines), [len(line) for line in lines]
    assert "Traceback" not in grown and "A" * 1000 not in grown


def test_a_peers_bad_requests_count_against_its_rate(initialised: Path) -> None:
    with gateway_with(initialised, max_runs_per_sender_per_minute=RATE) as gw:
        key = make_key(gw.root, "noisy")
        for n in range(RATE):
            assert _post(gw, key, _malformed(n)).json()["error"]["code"] == -32602
        good = {"message": {"messageId": "m-good", "role": "ROLE_USER", "parts": [{"text": "now a real one"}]}}
        refused = _post(gw, key, good).json()["error"]
        assert refused["data"][0]["metadata"]["code"] == "rate_limited", refused
        as_profile = {"message": {**good["message"], "messageId": "m-good-2", "metadata": {URI: {"profile": "ops"}}}}
        headers_ext = _post(gw, key, as_profile).json()["error"]  # its other sending profiles share the key's count
        assert headers_ext["data"][0]["metadata"]["code"] == "rate_limited", headers_ext
        # the person is never rate-limited, bad requests or not
        person = api_key(gw.root)
        for n in range(RATE):
            _post(gw, person, _malformed(100 + n))
        mine = {"message": {"messageId": "m-mine", "role": "ROLE_USER", "parts": [{"text": "the person's"}]}}
        assert _post(gw, person, mine).json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert not [e for e in ledger(gw) if e["message"] == "now a real one"]


def test_an_unknown_profiles_card_names_no_other_profile(initialised: Path) -> None:
    with in_home(initialised):
        assert run_cli("profile", "create", "payroll-secrets").exit_code == 0
    with gateway_with(initialised) as gw:
        for path in ("/p/nobody/.well-known/agent-card.json", "/p/nobody/.well-known/agent.json"):
            r = httpx.get(f"{gw.url}{path}", trust_env=False)
            assert r.status_code == 404 and r.json()["error"]["code"] == "profile_not_found", r.text
            assert "payroll" not in r.text and "default" not in r.text, r.text


def test_every_refusal_on_json_rpc_is_a_json_rpc_error(initialised: Path) -> None:
    """No key, a key that does not reach the profile, a profile that does not exist, a body past the limit:
    each answered as JSON-RPC's error object (the gateway's HTTP status kept), never the REST envelope."""
    with in_home(initialised):
        assert run_cli("profile", "create", "elsewhere").exit_code == 0
    with gateway_with(initialised) as gw:
        peer = make_key(gw.root, "narrow")  # reaches the default profile only
        cases = [
            (f"{gw.url}/a2a/jsonrpc", {}, 401, "invalid_api_key"),
            (f"{gw.url}/p/elsewhere/a2a/jsonrpc", {"Authorization": f"Bearer {peer}"}, 403, "forbidden"),
            (f"{gw.url}/p/nobody/a2a/jsonrpc", gw.headers(), 404, "profile_not_found"),
        ]
        body = {"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "x"}}
        for url, headers, status, code in cases:
            r = httpx.post(url, json=body, headers={**headers, **V1}, trust_env=False, timeout=10)
            answer = r.json()
            assert r.status_code == status and answer["jsonrpc"] == "2.0", (url, r.text)
            assert isinstance(answer["error"]["code"], int), (url, r.text)
            assert answer["error"]["data"][0]["metadata"]["code"] == code, (url, r.text)
