"""Two Backchannel gateways peered over A2A only: each registers the other by its agent card, so every message
goes over SendMessage/GetTask/CancelTask with the Backchannel extension carrying hops and chain."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from backchannel.home import config
from conftest import GatewayProcess
from test_peers_e2e import Pair, _init_home, cli, ledger, messaging_rules, peer_key, tool_results


def card_of(gw: GatewayProcess) -> str:
    return f"{gw.url}/.well-known/agent-card.json"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    base = tmp_path_factory.mktemp("a2a-peers")
    alpha, beta = _init_home(base / "alpha"), _init_home(base / "beta")
    p = Pair(alpha, beta, peer_key(alpha.root, "beta"), peer_key(beta.root, "alpha"))
    try:
        alpha.start()
        beta.start()
        for gw in (alpha, beta):  # its card served once (what it loads first), whatever the machine's load
            assert httpx.get(card_of(gw), timeout=60, trust_env=False).status_code == 200
        for home, name, gw, key in ((p.a, "beta", beta, p.beta_key), (p.b, "alpha", alpha, p.alpha_key)):
            added = cli(home, "peer", "add", name, "--url", card_of(gw), "--key", key, "--no-key-back")
            assert added.exit_code == 0, added.stderr
            assert "declares Backchannel's hop and chain extension" in added.stderr, added.stderr
        yield p
    finally:
        alpha.kill()
        beta.kill()


def status_json(root: Path, run_id: str) -> tuple[int, dict[str, object]]:
    result = cli(root, "peer", "status", "beta", run_id, "--json")
    return result.exit_code, json.loads(result.stdout)


def test_the_peers_are_recorded_as_a2a(pair: Pair) -> None:
    entry = config.load_yaml(config.config_path(pair.a))["peers"]["beta"]
    assert entry["dialect"] == "a2a" and entry["a2a_url"] == f"{pair.beta.url}/a2a/jsonrpc", entry


def test_dm_run_status_stop_and_follow_against_a_gateways_a2a_endpoint(pair: Pair) -> None:
    dm = cli(pair.a, "peer", "dm", "beta", "over a2a")
    assert dm.exit_code == 0, dm.stderr
    assert dm.stdout.strip() == "default (echo): over a2a"
    received = [e for e in ledger(pair.b) if "over a2a" in e["message"]]
    assert [(e["sender"], e["state"]) for e in received] == [("peer:alpha/default", "completed")], received

    started = cli(pair.a, "peer", "run", "beta", "/sleep 0.5\nrun over a2a", "--json")
    assert started.exit_code == 0, started.stderr
    run_id = json.loads(started.stdout)["run_id"]
    followed = cli(pair.a, "peer", "status", "beta", run_id, "--follow")  # the card says no streaming: polling
    assert followed.exit_code == 0, followed.stderr
    assert followed.stdout.splitlines() == [f"{run_id}: completed", "default (echo): run over a2a"], followed.stdout

    slow = json.loads(cli(pair.a, "peer", "run", "beta", "/sleep 30\nnever", "--json").stdout)["run_id"]
    stopped = cli(pair.a, "peer", "stop", "beta", slow)
    assert stopped.exit_code == 0, stopped.stderr
    deadline = time.monotonic() + 10
    while (found := status_json(pair.a, slow))[1]["status"] != "cancelled":
        assert time.monotonic() < deadline, found
        time.sleep(0.1)
    assert found[0] == 1 and found[1]["result"] == "failed", found

    code, unknown = status_json(pair.a, "run_nosuchrun")
    assert code == 1 and unknown["result"] == "unknown", unknown


def test_a_ping_pong_stops_at_the_hop_limit(pair: Pair) -> None:
    """alpha's agent → beta (hop 1) → beta's agent back to alpha (hop 2): past alpha's max_hops 1, refused."""
    pong = json.dumps({"target": "alpha", "message": "pong over a2a", "wait_seconds": 0})
    ping = json.dumps({"target": "beta", "message": f"/tool send_to_peer {pong}", "wait_seconds": 10})
    with (
        messaging_rules(pair.a, "default", allow=["peer:beta"], max_hops=1),
        messaging_rules(pair.b, "default", allow=["peer:alpha"]),
    ):
        result = cli(pair.a, "send", "default", f"/tool send_to_peer {ping}", "--json")
    assert result.exit_code == 0, result.stderr
    outer = tool_results(json.loads(result.stdout)["reply"], "send_to_peer")
    assert len(outer) == 1 and outer[0]["result"] == "delivered", outer
    inner = tool_results(outer[0]["reply"], "send_to_peer")
    assert len(inner) == 1 and inner[0]["result"] == "refused", inner
    assert inner[0]["error"]["code"] == "hop_limit", inner
    refused = [e for e in ledger(pair.a) if e["message"] == "pong over a2a"]
    assert [(e["state"], e["hops"]) for e in refused] == [("refused:hop_limit", 2)], refused


def test_a_mutual_wait_is_refused(pair: Pair) -> None:
    """alpha's Bot Chat waits on beta; beta's agent asking alpha back and waiting would wait forever."""
    back = json.dumps({"target": "alpha", "message": "ping back over a2a", "wait_seconds": 5})
    with (
        messaging_rules(pair.a, "default", allow=["peer:beta"]),
        messaging_rules(pair.b, "default", allow=["peer:alpha"]),
    ):
        result = cli(pair.a, "send", "default", f"/peer beta /tool send_to_peer {back}", "--json")
    assert result.exit_code == 0, result.stderr  # refused at once (would_deadlock below), not after the 5 s wait
    outer = tool_results(json.loads(result.stdout)["reply"], "send_to_peer")
    inner = tool_results(outer[0]["reply"], "send_to_peer")
    assert len(inner) == 1 and inner[0]["result"] == "refused", inner
    assert inner[0]["error"]["code"] == "would_deadlock", inner


def test_nothing_is_lost_across_a_sigkill_of_the_receiving_gateway(pair: Pair) -> None:
    started = cli(pair.a, "peer", "run", "beta", "/sleep 3\nsurvives the kill", "--json")
    assert started.exit_code == 0, started.stderr
    run_id = json.loads(started.stdout)["run_id"]
    deadline = time.monotonic() + 30
    while (found := status_json(pair.a, run_id)[1]).get("status") != "running":  # its turn has started
        assert found.get("status") == "queued" and time.monotonic() < deadline, found
        time.sleep(0.05)
    pair.beta.kill()  # SIGKILL while the turn runs
    pair.beta.start()
    deadline = time.monotonic() + 30
    while True:
        code, found = status_json(pair.a, run_id)
        if found.get("status") == "completed":
            break
        assert time.monotonic() < deadline, found
        time.sleep(0.2)
    assert code == 0 and found["result"] == "delivered" and found["output"] == "default (echo): survives the kill"
    with httpx.Client(base_url=pair.beta.url, headers=pair.beta.headers(), trust_env=False) as c:
        runs = [e for e in c.get("/v1/ledger").json()["data"] if "survives the kill" in e["message"]]
    assert len(runs) == 1, runs  # accepted once, run once after the restart


def test_a_malformed_extension_entry_is_invalid_params_naming_the_field_and_changes_nothing(pair: Pair) -> None:
    uri = "urn:backchannel:a2a:hops-chain:v1"
    for entry, field in (({"hops": -1}, "hops"), ({"chain": "a,b"}, "chain"), ("two", uri)):
        message = {"messageId": f"bad-{field}", "role": "ROLE_USER", "parts": [{"text": "bad hops"}]}
        message["metadata"] = {uri: entry}
        r = httpx.post(
            f"{pair.beta.url}/a2a/jsonrpc",
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
            headers={"Authorization": f"Bearer {pair.beta_key}", "A2A-Version": "1.0", "A2A-Extensions": uri},
            trust_env=False,
        )
        error = r.json()["error"]
        assert error["code"] == -32602 and field in error["message"], error
    assert not [e for e in ledger(pair.b) if e["message"] == "bad hops"]
