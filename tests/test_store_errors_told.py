"""Who learns what of a store's error (issue 38 item 7): while the store is away a made-up key is refused as any
unknown key is (401); a peer's key is told only `store_unavailable`, on every surface; the person's key gets
the whole error, naming the store. Nobody but the person learns the store's user, host, port or database. A
real PostgreSQL cluster of the test's own, stopped under a real gateway; a real lock on a home's state.db."""

from __future__ import annotations

import secrets
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

import postgres
from conftest import GatewayThread, free_port, use_shared_store
from gateway_http import gateway_with
from test_trust_keys import as_key, make_key, person

A2A_V1 = {"A2A-Version": "1.0"}
BACK_WITHIN = 120.0  # seconds for the gateway to reach its store again once it is back: a bound on a hang


@pytest.fixture
def own_cluster() -> Iterator[postgres.Cluster]:
    postgres.require()
    with postgres.cluster(port=free_port()) as running:
        yield running


@pytest.fixture
def on_a_shared_store(initialised: Path, own_cluster: postgres.Cluster) -> Iterator[tuple[GatewayThread, str]]:
    url = own_cluster.new_database()
    use_shared_store(initialised, url)
    with gateway_with(initialised) as gw:
        assert isinstance(gw, GatewayThread)
        yield gw, url


def tells_where(text: str, url: str) -> list[str]:
    """What of the store's address `text` names: its user, host, port, database, or that it is PostgreSQL."""
    parts = urllib.parse.urlsplit(url)
    names = [parts.username or "", parts.hostname or "", str(parts.port), parts.path.strip("/"), "postgres"]
    return [name for name in names if name and name in text]


def a2a_get_task(c: httpx.Client) -> httpx.Response:
    return c.post(
        "/a2a/jsonrpc",
        json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "run_none"}},
        headers=A2A_V1,
    )


def a2a_code(r: httpx.Response) -> Any:
    return r.json()["error"]["data"][0]["metadata"]["code"]


def test_while_the_store_is_away_only_the_person_learns_where_it_is(
    on_a_shared_store: tuple[GatewayThread, str], own_cluster: postgres.Cluster
) -> None:
    gw, url = on_a_shared_store
    peer_key = make_key("spark")
    made_up = "bcpk_" + secrets.token_urlsafe(32)
    with as_key(gw, peer_key) as peer, as_key(gw, made_up) as stranger, person(gw) as p:
        assert peer.get("/api/sessions").status_code == 200
        assert stranger.get("/api/sessions").status_code == 401

        postgres.stop_server(own_cluster)
        try:
            for r in (stranger.get("/api/sessions"), stranger.post("/v1/runs", json={"input": "hi"})):
                assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", r.text
                assert not tells_where(r.text, url), r.text
            r = a2a_get_task(stranger)
            assert r.status_code == 401 and not tells_where(r.text, url), r.text

            r = peer.get("/api/sessions")
            assert r.status_code == 503 and r.headers["retry-after"], r.text
            error = r.json()["error"]
            assert error["code"] == "store_unavailable" and "store" in error["message"], error
            assert not tells_where(r.text, url), r.text
            r = a2a_get_task(peer)
            assert r.status_code == 503 and a2a_code(r) == "store_unavailable", r.text
            assert not tells_where(r.text, url), r.text

            r = p.get("/api/sessions")
            assert r.status_code == 503 and r.json()["error"]["code"] == "store_unavailable", r.text
            database = urllib.parse.urlsplit(url).path.strip("/")
            assert database in r.json()["error"]["message"], r.text  # the person is told which store, and why
        finally:
            postgres.start_server(own_cluster)

        deadline = time.monotonic() + BACK_WITHIN
        while p.get("/api/sessions").status_code != 200:
            assert time.monotonic() < deadline, "the gateway did not reach its store again"
            time.sleep(0.2)
        assert peer.get("/api/sessions").status_code == 200
        assert stranger.get("/api/sessions").status_code == 401


@pytest.mark.sqlite  # the home's own state.db, locked
def test_a_store_error_inside_an_a2a_method_is_told_plainly_to_a_peer_and_in_full_to_the_person(
    gateway: GatewayThread,
) -> None:
    peer_key = make_key("spark")
    with as_key(gateway, peer_key) as peer, person(gateway) as p:
        assert peer.get("/api/sessions").status_code == 200  # the key is known, and its use noted already

        def send(c: httpx.Client, text: str) -> httpx.Response:
            message = {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]}
            return c.post(
                "/a2a/jsonrpc",
                json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
                headers=A2A_V1,
                timeout=120,
            )

        lock = sqlite3.connect(gateway.root / "state.db", isolation_level=None, timeout=60)
        try:
            lock.execute("BEGIN EXCLUSIVE")  # held until both answers are in: each write waits, then fails
            with ThreadPoolExecutor(2) as pool:
                told_peer, told_person = pool.map(lambda args: send(*args), [(peer, "from spark"), (p, "mine")])
        finally:
            lock.execute("ROLLBACK")
            lock.close()
    for r in (told_peer, told_person):
        assert r.status_code == 200 and a2a_code(r) == "store_unavailable", r.text  # JSON-RPC's error, in a 200
    assert "state.db" not in told_peer.text and "store" in told_peer.json()["error"]["message"], told_peer.text
    assert "state.db" in told_person.json()["error"]["message"], told_person.text
