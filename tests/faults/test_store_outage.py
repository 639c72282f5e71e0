"""The shared store's server stopped under load and started again (issue 24).

Contract: DESIGN.md section 10 and the issue's faults: while PostgreSQL is away, requests are answered at once
with 503 `store_unavailable` and a Retry-After, nothing is answered before it is saved, and the gateway recovers
by itself when the database is back; afterwards every message sent (each with its own key, retried by its
sender) has one run, one reply. A cluster of the test's own, so that stopping it stops no other test's store.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

import postgres
from backchannel.home import config
from conftest import GatewayProcess, free_port, use_shared_store
from store_audit import snapshot

pytestmark = pytest.mark.faults

COUNT = 120
ANSWER_WITHIN = 10.0  # seconds: a request while the store is away is answered (503), never left hanging
TEST_BUDGET = 120.0


@dataclass
class Sent:
    accepted: dict[int, str] = field(default_factory=dict)  # message -> run id
    unavailable: list[tuple[float, str | None]] = field(default_factory=list)  # (seconds taken, Retry-After)
    other: list[str] = field(default_factory=list)
    slowest: float = 0.0
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def own_cluster() -> Iterator[postgres.Cluster]:
    postgres.require()
    with postgres.cluster(port=free_port()) as running:
        yield running


@pytest.fixture
def gateway_on_it(initialised: Path, own_cluster: postgres.Cluster) -> Iterator[GatewayProcess]:
    use_shared_store(initialised, own_cluster.new_database())
    cfg = config.config_path(initialised)
    data = config.load_yaml(cfg)
    data["store"]["lease_seconds"] = 2
    config.write_yaml(cfg, data)
    gw = GatewayProcess(initialised, free_port())
    gw.start()
    try:
        yield gw
    finally:
        gw.close()


def send_all(gw: GatewayProcess, session: str, sent: Sent, deadline: float) -> None:
    try:
        with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=30, trust_env=False) as c:
            for i in range(COUNT):
                while True:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"message {i} not accepted in time")
                    began = time.monotonic()
                    r = c.post(
                        f"/api/sessions/{session}/chat",
                        json={"message": f"outage-msg-{i:03d}"},
                        headers={"Idempotency-Key": f"outage-{i}", "X-Hermes-Wait-Seconds": "0.05"},
                    )
                    took = time.monotonic() - began
                    sent.slowest = max(sent.slowest, took)
                    if r.status_code in (200, 202):
                        sent.accepted[i] = r.json()["run_id"]
                        break
                    if r.status_code == 503 and r.json()["error"]["code"] == "store_unavailable":
                        sent.unavailable.append((took, r.headers.get("retry-after")))
                        time.sleep(0.1)
                        continue
                    sent.other.append(f"message {i}: {r.status_code} {r.text[:300]}")
                    time.sleep(0.1)
                time.sleep(0.01)
    except BaseException as exc:
        sent.error = exc
    finally:
        sent.done.set()


def test_the_gateway_rides_out_its_store_going_away_and_coming_back(
    gateway_on_it: GatewayProcess, own_cluster: postgres.Cluster
) -> None:
    gw = gateway_on_it
    started = time.monotonic()
    with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=10, trust_env=False) as c:
        r = c.post("/api/sessions", json={"title": "outage"})
        assert r.status_code == 201, r.text
        session = r.json()["session"]["id"]
    sent = Sent()
    sender = threading.Thread(target=send_all, args=(gw, session, sent, started + TEST_BUDGET - 20), daemon=True)
    sender.start()
    while len(sent.accepted) < 30 and not sent.done.is_set():
        time.sleep(0.01)
    postgres.stop_server(own_cluster)  # the store goes away under load
    away_until = time.monotonic() + 3
    while time.monotonic() < away_until:
        with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=30, trust_env=False) as c:
            assert c.get("/health").status_code == 200  # the gateway itself is still there
        time.sleep(0.2)
    postgres.start_server(own_cluster)
    sender.join(timeout=TEST_BUDGET)
    assert sent.error is None, f"the sender failed: {sent.error!r}\n{gw.log()[-3000:]}"
    assert not sent.other, sent.other[:5]
    assert sent.unavailable, "no request met the store away"
    assert all(retry is not None for _took, retry in sent.unavailable), sent.unavailable[:5]
    assert sent.slowest < ANSWER_WITHIN, f"a request took {sent.slowest:.1f}s"
    assert sorted(sent.accepted) == list(range(COUNT))

    while True:  # every run ends, once, with its reply
        store = snapshot(gw.root)
        runs = {i: store.by_key(f"outage-{i}") for i in range(COUNT)}
        if all(len(r) == 1 and r[0]["state"] == "completed" for r in runs.values()):
            break
        assert time.monotonic() - started < TEST_BUDGET, (
            [
                (i, [(x["state"], x["error"]) for x in r])
                for i, r in runs.items()
                if [x["state"] for x in r] != ["completed"]
            ][:5],
            gw.log()[-3000:],
        )
        time.sleep(0.2)
    for i in range(COUNT):
        run = store.audit_key(f"outage-{i}").run
        assert run["id"] == sent.accepted[i] and run["reply"] == f"default (echo): outage-msg-{i:03d}"
