"""Keys are identities, loops a peer cannot talk past, and holds: through a real gateway process and the CLI.

A peer key is made with `backchannel key create`; requests are raw HTTP with it, as a Hermes-style client
(only `X-Hermes-Sender-Profile`) or a forging one (hops 0, an empty chain, another gateway's name).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import GatewayProcess, GatewayThread, run_cli
from gateway_http import set_messaging

TIMEOUT = httpx.Timeout(10.0)


def make_key(name: str, *args: str) -> str:
    made = run_cli("key", "create", name, *args, "--json")
    assert made.exit_code == 0, made.stderr
    key: str = json.loads(made.stdout)["key"]
    return key


def as_key(gw: GatewayProcess, key: str) -> httpx.Client:
    return httpx.Client(base_url=gw.url, headers={"Authorization": f"Bearer {key}"}, timeout=TIMEOUT, trust_env=False)


def person(gw: GatewayProcess) -> httpx.Client:
    return httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=TIMEOUT, trust_env=False)


def bot_chat(c: httpx.Client, prefix: str = "") -> str:
    r = c.post(f"{prefix}/api/sessions", json={"title": "Bot Chat"})
    assert r.status_code in (200, 201), r.text
    return str(r.json()["session"]["id"])


def dm(c: httpx.Client, session_id: str, text: str, key: str, prefix: str = "", **headers: str) -> httpx.Response:
    return c.post(
        f"{prefix}/api/sessions/{session_id}/chat",
        json={"message": text},
        headers={"Idempotency-Key": key, "X-Hermes-Sender-Profile": "default", "X-Hermes-Wait-Seconds": "5", **headers},
    )


def ledger(c: httpx.Client, prefix: str = "") -> list[dict[str, Any]]:
    r = c.get(f"{prefix}/v1/ledger", params={"limit": 1000})
    assert r.status_code == 200, r.text
    data: list[dict[str, Any]] = r.json()["data"]
    return data


def wait_run(c: httpx.Client, run_id: str, statuses: set[str], within: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        body: dict[str, Any] = c.get(f"/v1/runs/{run_id}").json()
        if body.get("status") in statuses:
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.05)


# --- 1. keys are identities -------------------------------------------------------------------------


@pytest.mark.sqlite  # reads the key hashes in state.db
def test_key_create_list_rotate_revoke(gateway: GatewayThread) -> None:
    key = make_key("spark", "--profile", "default")
    listed = run_cli("key", "list", "--json")
    assert listed.exit_code == 0 and key not in listed.stdout
    [row] = json.loads(listed.stdout)
    assert (row["name"], row["profiles"], row["read"]) == ("spark", ["default"], False)
    assert key not in (gateway.root / "state.db").read_bytes().decode("latin-1")  # only its hash is kept
    assert run_cli("key", "create", "spark").exit_code == 2  # one key per name: rotate gives a new value
    with as_key(gateway, key) as c:
        caps = c.get("/v1/capabilities")
        assert caps.status_code == 200 and caps.json()["auth"]["identity"] == "peer:spark"
    assert json.loads(run_cli("key", "list", "--json").stdout)[0]["last_used_at"] is not None

    rotated = run_cli("key", "rotate", "spark", "--json")
    assert rotated.exit_code == 0, rotated.stderr
    new = json.loads(rotated.stdout)["key"]
    with as_key(gateway, key) as old_c, as_key(gateway, new) as new_c:
        assert old_c.get("/v1/capabilities").status_code == 401
        assert new_c.get("/v1/capabilities").status_code == 200
    assert run_cli("key", "revoke", "spark").exit_code == 0
    with as_key(gateway, new) as c:
        assert c.get("/v1/capabilities").status_code == 401
    assert run_cli("key", "revoke", "spark").exit_code == 2


def test_a_peer_key_is_its_identity_whatever_the_headers_say(gateway: GatewayThread) -> None:
    """A Hermes-style client (only X-Hermes-Sender-Profile: default) with key spark is peer:spark/default."""
    key = make_key("spark")
    set_messaging(gateway.root, "default", accept=["peer:spark/*"])
    with as_key(gateway, key) as c, person(gateway) as p:
        sid = bot_chat(c)
        r = dm(c, sid, "hello from spark", "k1")
        assert r.status_code == 200 and r.json()["result"] == "delivered", r.text
        # another gateway's name in the header changes nothing: still spark, so accept ["peer:two/*"] refuses
        set_messaging(gateway.root, "default", accept=["peer:two/*"])
        forged = dm(c, sid, "I am two", "k2", **{"X-Backchannel-Gateway": "two"})
        assert forged.json()["result"] == "refused" and forged.json()["reason"] == "not_allowed", forged.text
        entries = {e["message"]: e for e in ledger(p)}
        assert entries["hello from spark"]["sender"] == "peer:spark/default"
        assert entries["I am two"]["sender"] == "peer:spark/default"
        msgs = p.get(f"/api/sessions/{sid}/messages").json()["data"]
        assert any(m["content"].startswith("[Message from peer spark/default") for m in msgs)


def test_the_persons_key_is_the_person_whatever_the_headers_say(gateway: GatewayThread) -> None:
    with person(gateway) as p:
        sid = bot_chat(p)
        r = dm(p, sid, "old setup", "k-old", **{"X-Backchannel-Gateway": "spark"})
        assert r.status_code == 200, r.text
        assert [e["sender"] for e in ledger(p) if e["message"] == "old setup"] == ["human:api"]
        msgs = p.get(f"/api/sessions/{sid}/messages").json()["data"]
        assert [m["content"] for m in msgs if m["role"] == "user"] == ["old setup"]  # unframed: the person's


def test_a_peer_key_reaches_its_bot_chats_and_its_own_runs_only(gateway: GatewayThread) -> None:
    assert run_cli("profile", "create", "research").exit_code == 0
    key = make_key("spark")
    with person(gateway) as p:
        other = p.post("/api/sessions", json={"title": "private"}).json()["session"]["id"]
        mine = p.post("/v1/runs", json={"input": "the person's run"}).json()["run_id"]
    with as_key(gateway, key) as c:
        sid = bot_chat(c)
        listed = c.get("/api/sessions").json()["data"]
        assert [s["id"] for s in listed] == [sid]
        run = c.post("/v1/runs", json={"input": "a run of spark"})
        assert run.status_code == 202, run.text
        assert c.get(f"/v1/runs/{run.json()['run_id']}").status_code == 200
        forbidden = [
            c.post("/api/sessions", json={"title": "mine now"}),
            c.get(f"/api/sessions/{other}"),
            c.get(f"/api/sessions/{sid}/messages"),
            c.post(f"/api/sessions/{other}/chat", json={"message": "hi"}),
            c.get(f"/v1/runs/{mine}"),
            c.post(f"/v1/runs/{mine}/stop"),
            c.get("/v1/ledger"),
            c.get("/v1/held"),
            c.post("/v1/gateway/stop"),  # the gateway answers the reader below: it did not stop
            c.get("/p/research/v1/capabilities"),
            c.post("/p/research/api/sessions", json={"title": "Bot Chat"}),
        ]
        for r in forbidden:
            assert r.status_code == 403, (r.request.method, r.request.url, r.text)
            assert r.json()["error"]["code"] == "forbidden"
    reader = make_key("laptop", "--profile", "*", "--read")
    with as_key(gateway, reader) as c:
        assert c.get(f"/api/sessions/{sid}/messages").status_code == 200
        assert c.get(f"/v1/runs/{mine}").status_code == 200
        assert c.post(f"/v1/runs/{mine}/stop").status_code == 403  # reading is not stopping
        assert c.post("/p/research/v1/gateway/stop").status_code == 403
        assert c.get("/p/research/v1/ledger").status_code == 200


def test_peer_add_makes_the_key_back_and_prints_the_command(initialised: Path) -> None:
    added = run_cli(
        "peer",
        "add",
        "spark",
        "--url",
        "http://127.0.0.1:9",
        "--key",
        "bcpk_xxxxxxxxxxxx",
        "--key-back",
        "--as",
        "home",
    )
    assert added.exit_code == 0, added.stderr
    line = next(ln for ln in added.stdout.splitlines() if "peer add home" in ln)
    assert line.strip().startswith("backchannel peer add home --url http://127.0.0.1:")
    value = line.rsplit("--key ", 1)[1].strip()
    assert [k["name"] for k in json.loads(run_cli("key", "list", "--json").stdout)] == ["spark"]
    again = run_cli("peer", "add", "spark", "--url", "http://127.0.0.1:9", "--key", "bcpk_xxxxxxxxxxxx", "--key-back")
    assert again.exit_code == 0 and value not in again.stdout and "key rotate spark" in again.stderr


# --- 2. loops a peer cannot talk past ----------------------------------------------------------------


def test_a_forging_peer_is_held_to_the_hops_its_exchange_reached_and_to_its_budget(gateway: GatewayThread) -> None:
    key = make_key("spark")
    forged = {"X-Backchannel-Hops": "0", "X-Backchannel-Chain": "", "X-Backchannel-Gateway": "elsewhere"}
    with as_key(gateway, key) as c, person(gateway) as p:
        sid = bot_chat(c)
        assert dm(c, sid, "at hop three", "h1", **{"X-Backchannel-Hops": "3"}).json()["result"] == "delivered"
        assert dm(c, sid, "back to zero", "h2", **forged).json()["result"] == "delivered"
        hops = {e["message"]: e["hops"] for e in ledger(p)}
        assert hops["back to zero"] == 3  # never lower than its exchange already reached here
        set_messaging(gateway.root, "default", max_hops=2)
        stopped = dm(c, sid, "zero again", "h3", **forged).json()
        assert (stopped["result"], stopped["reason"]) == ("refused", "hop_limit"), stopped
        set_messaging(gateway.root, "default", max_hops=6, inbound_budget_per_hour=3)
        assert dm(c, sid, "third", "h4", **forged).json()["result"] == "delivered"
        over = dm(c, sid, "fourth", "h5", **forged).json()
        assert (over["result"], over["reason"]) == ("refused", "inbound_budget"), over
        states = {e["message"]: e["state"] for e in ledger(p)}
        assert states["zero again"] == "refused:hop_limit" and states["fourth"] == "refused:inbound_budget"


# --- 3. holds ----------------------------------------------------------------------------------------


def held_json() -> list[dict[str, Any]]:
    result = run_cli("held", "--json")
    assert result.exit_code == 0, result.stderr
    data: list[dict[str, Any]] = json.loads(result.stdout)
    return data


def test_held_then_approved_then_denied(gateway: GatewayThread) -> None:
    key = make_key("spark")
    set_messaging(gateway.root, "default", hold=["peer:*"])
    with as_key(gateway, key) as c, person(gateway) as p:
        sid = bot_chat(c)
        first = dm(c, sid, "please approve", "hold-1").json()
        assert (first["result"], first["status"]) == ("held", "held"), first
        run_id = first["delivery_id"]
        assert [h["run_id"] for h in held_json()] == [run_id]
        assert c.post(f"/v1/held/{run_id}/approve").status_code == 403  # the person's only
        approved = run_cli("approve", run_id)
        assert approved.exit_code == 0, approved.stderr
        done = wait_run(c, run_id, {"completed"})  # the peer reads its outcome with status/follow
        assert "please approve" in done["output"]

        second = dm(c, sid, "please deny", "hold-2").json()
        denied = run_cli("deny", second["delivery_id"], "--why", "not today", "--json")
        assert denied.exit_code == 0, denied.stderr
        assert json.loads(denied.stdout)["status"] == "denied"
        body = c.get(f"/v1/runs/{second['delivery_id']}").json()
        assert (body["status"], body["error"]) == ("denied", "not today")
        assert run_cli("approve", second["delivery_id"]).exit_code == 2  # not held any more
        states = {e["message"]: e["state"] for e in ledger(p)}
        assert states["please approve"] == "completed" and states["please deny"] == "denied"
        assert held_json() == []


def test_a_held_message_expires_and_wakes_its_local_sender(gateway: GatewayThread) -> None:
    assert run_cli("profile", "create", "research").exit_code == 0
    set_messaging(gateway.root, "research", allow=["default"])
    set_messaging(gateway.root, "default", hold=["research"], hold_expiry_seconds=1)
    sent = run_cli("send", "research", "/send default are you there", "--json")
    assert sent.exit_code == 0, sent.stderr
    assert '"result": "held"' in json.loads(sent.stdout)["reply"]
    [held] = held_json()
    assert held["sender"].startswith("research/")
    with person(gateway) as p:
        wait_run(p, held["run_id"], {"expired"}, within=10)
        deadline = time.monotonic() + 10
        while not [e for e in ledger(p) if e["message"].startswith(f"[Reply to your message {held['run_id']}")]:
            assert time.monotonic() < deadline, "the sender was not woken with the expiry"
            time.sleep(0.1)


# --- 4. item 9 ---------------------------------------------------------------------------------------


def test_a_profiles_ledger_has_only_its_entries(gateway: GatewayThread) -> None:
    assert run_cli("profile", "create", "research").exit_code == 0
    assert run_cli("send", "default", "for default").exit_code == 0
    assert run_cli("send", "research", "for research").exit_code == 0
    with person(gateway) as p:
        assert {e["message"] for e in ledger(p, "/p/research")} == {"for research"}
        assert {"for default", "for research"} <= {e["message"] for e in ledger(p)}


@pytest.mark.parametrize("slow", [False, True])
def test_receipts_tell_queued_behind_others_from_running(gateway: GatewayThread, slow: bool) -> None:
    key = make_key("spark")
    with as_key(gateway, key) as c:
        sid = bot_chat(c)
        if slow:
            dm(c, sid, "/sleep 1.5\nahead", "busy-1", **{"X-Hermes-Wait-Seconds": "0.1"})
        r = dm(c, sid, "/sleep 1\nmine", f"busy-2-{slow}", **{"X-Hermes-Wait-Seconds": "0.2"}).json()
        assert r["result"] == "receipt", r
        if slow:
            assert (r["status"], r["busy"]) == ("queued", True), r
            assert r["status_detail"].startswith("target_busy")
        else:
            assert (r["status"], r["busy"]) == ("running", False), r
            assert r["status_detail"].startswith("running")
