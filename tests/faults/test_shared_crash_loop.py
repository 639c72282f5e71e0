"""Three gateways on one PostgreSQL store, one of them SIGKILLed every few seconds and restarted (issue 24).

Contract: DESIGN.md section 10. 500 messages, each with its own idempotency key, go to five sessions through the
three gateways in turn; a sender that meets a dead gateway asks the next one with the same key. Meanwhile a
gateway is killed (SIGKILL) every second or so and started again. Afterwards, read from the store itself
(`store_audit`): every message accepted once, under one run, completed with its one reply; and in each session
no two turns overlapped (each run's final turn began after the one before it ended), in the order sent.
"""

from __future__ import annotations

import itertools
import random
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from backchannel.home import config
from conftest import GatewayProcess, free_port, use_shared_store
from store_audit import snapshot

pytestmark = pytest.mark.faults

COUNT = 500
SESSIONS = 5
GATEWAYS = 3
SLOW_EVERY = 25  # every 25th message is a slow turn, so kills land mid-turn
KILL_EVERY = (0.5, 1.0)  # seconds between a restart and the next kill
WAIT = "0.05"  # a receipt is as good as a reply here
TEST_BUDGET = 240.0
TERMINAL = {"completed", "failed", "cancelled", "expired"}


def key(i: int) -> str:
    return f"shared-key-{i:03d}"


def text(i: int) -> str:
    word = f"shared-msg-{i:03d}"
    return f"/sleep 0.3\n{word}" if i % SLOW_EVERY == SLOW_EVERY - 1 else word


@dataclass
class Sent:
    run_ids: dict[int, str] = field(default_factory=dict)
    other_run_ids: list[str] = field(default_factory=list)  # a retry answered with another run: a bug
    bad_answers: list[str] = field(default_factory=list)
    retries: int = 0
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def cluster_of_gateways(initialised: Path, postgres_url: str, tmp_path: Path) -> Iterator[list[GatewayProcess]]:
    use_shared_store(initialised, postgres_url)
    cfg = config.config_path(initialised)
    data = config.load_yaml(cfg)
    data["gateway"]["max_attempts"] = 50
    data["store"]["lease_seconds"] = 2
    config.write_yaml(cfg, data)
    homes = [initialised]
    for n in range(1, GATEWAYS):
        other = tmp_path / f"home-{n}"
        shutil.copytree(initialised, other, ignore=shutil.ignore_patterns("state.db*", "gateway*", "*.log"))
        homes.append(other)
    gateways = [GatewayProcess(root, free_port()) for root in homes]
    try:
        for gw in gateways:
            gw.start()
        yield gateways
    finally:
        for gw in gateways:
            gw.kill()


def send_all(gateways: list[GatewayProcess], sessions: list[str], sent: Sent, deadline: float) -> None:
    """Each message once, to the gateways in turn; one that cannot be reached: the next, with the same key."""
    clients = [
        httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=httpx.Timeout(5.0), trust_env=False)
        for gw in gateways
    ]
    try:
        for i in range(COUNT):
            at = i % len(clients)
            while True:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"message {i} not accepted in time")
                try:
                    r = clients[at].post(
                        f"/api/sessions/{sessions[i % len(sessions)]}/chat",
                        json={"message": text(i)},
                        headers={"Idempotency-Key": key(i), "X-Hermes-Wait-Seconds": WAIT},
                    )
                except httpx.TransportError:  # down, restarting, or killed while answering: the next gateway
                    sent.retries += 1
                    at = (at + 1) % len(clients)
                    time.sleep(0.02)
                    continue
                if r.status_code in (200, 202):
                    run_id = r.json().get("run_id")
                    assert isinstance(run_id, str), r.text
                    if i not in sent.run_ids:
                        sent.run_ids[i] = run_id
                    elif sent.run_ids[i] != run_id:
                        sent.other_run_ids.append(f"message {i}: {sent.run_ids[i]} then {run_id}")
                    break
                sent.bad_answers.append(f"message {i}: {r.status_code} {r.text[:300]}")
                sent.retries += 1
                at = (at + 1) % len(clients)
                time.sleep(0.05)
            time.sleep(random.uniform(0.0, 0.03))  # spread the sends over the kills
    except BaseException as exc:
        sent.error = exc
    finally:
        for c in clients:
            c.close()
        sent.done.set()


def test_three_gateways_on_one_store_lose_nothing_and_run_nothing_twice_while_one_is_killed_again_and_again(
    cluster_of_gateways: list[GatewayProcess],
) -> None:
    gateways = cluster_of_gateways
    started = time.monotonic()
    deadline = started + TEST_BUDGET - 30
    rng = random.Random()
    sessions: list[str] = []
    with httpx.Client(base_url=gateways[0].url, headers=gateways[0].headers(), trust_env=False, timeout=10) as c:
        for n in range(SESSIONS):
            r = c.post("/api/sessions", json={"title": f"shared crash loop {n}"})
            assert r.status_code == 201, r.text
            sessions.append(str(r.json()["session"]["id"]))

    sent = Sent()
    sender = threading.Thread(target=send_all, args=(gateways, sessions, sent, deadline), daemon=True)
    sender.start()
    kills = 0
    while not sent.done.wait(rng.uniform(*KILL_EVERY)):
        victim = rng.choice(gateways)
        victim.kill()
        kills += 1
        time.sleep(rng.uniform(0.0, 0.3))
        victim.start()
    sender.join(timeout=5)
    assert sent.error is None, f"the sender failed: {sent.error!r}"
    assert kills >= 4, f"only {kills} kills: the sends ended too soon to test anything"

    # Until every run has ended (a turn cut by a kill is taken over once its gateway's lease is gone).
    runs: dict[int, dict[str, Any]] = {}
    while True:
        store = snapshot(gateways[0].root)
        runs = {i: found[0] for i in sent.run_ids if (found := store.by_key(key(i)))}
        if len(runs) == COUNT and all(run["state"] in TERMINAL for run in runs.values()):
            break
        assert time.monotonic() - started < TEST_BUDGET, (
            f"runs not ended: {[(i, r['state']) for i, r in runs.items() if r['state'] not in TERMINAL][:10]}"
        )
        time.sleep(0.2)
    summary = f"{kills} kills, {sent.retries} retries, reruns: {sum(r['attempts'] > 1 for r in runs.values())}"
    print(summary)

    assert sorted(sent.run_ids) == list(range(COUNT)), summary  # every message accepted
    assert not sent.other_run_ids, sent.other_run_ids  # each under one run, whichever gateway was asked
    assert not sent.bad_answers, sent.bad_answers[:10]
    for i in range(COUNT):  # one run, completed, its message and reply once each in its session
        audited = store.audit_key(key(i)).run
        assert audited["id"] == sent.run_ids[i]
        assert f"shared-msg-{i:03d}" in (audited["reply"] or ""), audited

    for n, session in enumerate(sessions):  # one turn at a time per session, in the order sent
        mine = sorted((r for r in runs.values() if r["session_id"] == session), key=lambda r: r["seq"])
        assert [r["message"] for r in mine] == [text(i) for i in range(n, COUNT, SESSIONS)]
        for before, after in itertools.pairwise(mine):
            assert after["started_at"] >= before["finished_at"], (session, before["id"], after["id"], summary)
