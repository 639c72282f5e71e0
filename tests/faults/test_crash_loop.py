"""Crash loop: 120 idempotent sends to one session while the gateway is SIGKILLed and restarted.

Contract: DESIGN.md section 4 (a key is unique: a second send with the same key returns the first run and
never runs a turn again, also after a restart; per-session FIFO; a receipt means the run goes on) and
the issue's fault test: each message handled exactly once, with its reply; none lost.

A sender thread posts each message with its own Idempotency-Key and a short wait (receipts are fine),
retrying the same key until it gets a 200 or 202 (connection errors while the gateway is down included).
Meanwhile the main thread kills the gateway with SIGKILL at random moments and restarts it on the same
port and home, at least 5 times, once while a slow turn is running.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from backchannel.home import config
from conftest import GatewayProcess, api_key, free_port

pytestmark = pytest.mark.faults

COUNT = 120
SLOW_EVERY = 10  # every 10th message is a slow turn, so kills land mid-turn
KILL_AT = (12, 35, 60, 85)  # sender progress (messages accepted) at which the gateway is killed, give or take
WAIT = "0.05"  # X-Hermes-Wait-Seconds: a receipt is as good as a reply here
TEST_BUDGET = 60.0  # seconds for the whole test
TERMINAL = {"completed", "failed", "cancelled", "expired"}


def token(i: int) -> str:
    return f"crash-msg-{i:03d}"


def text(i: int) -> str:
    return f"/sleep 0.3\n{token(i)}" if i % SLOW_EVERY == SLOW_EVERY - 1 else token(i)


@dataclass
class Sent:
    run_ids: dict[int, str] = field(default_factory=dict)  # message -> the run id of its first acceptance
    accepted: list[int] = field(default_factory=list)  # messages in the order they were first accepted
    other_run_ids: list[str] = field(default_factory=list)  # a retry that came back with another run: a bug
    bad_answers: list[str] = field(default_factory=list)  # any status but 200/202
    retries: int = 0
    replays: int = 0
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def crash_gateway(initialised: Path) -> Iterator[GatewayProcess]:
    """A gateway on a fixed port, with room for runs interrupted several times (max_attempts 3 fails them)."""
    gw = GatewayProcess(initialised, free_port())
    cfg = config.config_path(initialised)
    data = config.load_yaml(cfg)
    data["gateway"].update(port=gw.port, max_attempts=20)
    config.write_yaml(cfg, data)
    gw.start()
    try:
        yield gw
    finally:
        gw.kill()


def send_all(gw: GatewayProcess, session_id: str, sent: Sent, deadline: float) -> None:
    """Send every message once, retrying each with its own key until it is accepted."""
    headers = gw.headers()
    try:
        with httpx.Client(base_url=gw.url, headers=headers, timeout=httpx.Timeout(5.0), trust_env=False) as c:
            for i in range(COUNT):
                while True:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"message {i} not accepted in time")
                    try:
                        r = c.post(
                            f"/api/sessions/{session_id}/chat",
                            json={"message": text(i)},
                            headers={"Idempotency-Key": f"crash-key-{i}", "X-Hermes-Wait-Seconds": WAIT},
                        )
                    except httpx.TransportError:  # down, restarting, or killed while answering
                        sent.retries += 1
                        time.sleep(0.05)
                        continue
                    if r.status_code in (200, 202):
                        body: dict[str, Any] = r.json()
                        run_id = body.get("run_id")
                        assert isinstance(run_id, str) and run_id.startswith("run_"), f"message {i}: {body}"
                        sent.replays += bool(body.get("replayed"))
                        if i not in sent.run_ids:
                            sent.run_ids[i] = run_id
                            sent.accepted.append(i)
                        elif sent.run_ids[i] != run_id:
                            sent.other_run_ids.append(f"message {i}: {sent.run_ids[i]} then {run_id}")
                        break
                    sent.bad_answers.append(f"message {i}: {r.status_code} {r.text[:300]}")
                    sent.retries += 1
                    time.sleep(0.05)
                time.sleep(random.uniform(0.0, 0.03))  # spread the sends over the restarts
    except BaseException as exc:
        sent.error = exc
    finally:
        sent.done.set()


def running_slow_run(c: httpx.Client, sent: Sent) -> bool:
    """Is one of the slow turns running right now?"""
    for i, run_id in list(sent.run_ids.items()):
        if i % SLOW_EVERY == SLOW_EVERY - 1:
            try:
                if c.get(f"/v1/runs/{run_id}").json().get("status") == "running":
                    return True
            except (httpx.TransportError, ValueError):
                return False
    return False


def test_idempotent_sends_survive_a_sigkill_restart_loop(crash_gateway: GatewayProcess) -> None:
    gw = crash_gateway
    started = time.monotonic()
    deadline = started + TEST_BUDGET - 10
    rng = random.Random()
    with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=httpx.Timeout(5.0), trust_env=False) as c:
        r = c.post("/api/sessions", json={"title": "crash loop"})
        assert r.status_code == 201, r.text
        sid = str(r.json()["session"]["id"])

    sent = Sent()
    sender = threading.Thread(target=send_all, args=(gw, sid, sent, deadline), daemon=True)
    sender.start()

    kills = 0
    mid_turn_kills = 0
    for at in KILL_AT:
        target = at + rng.randint(-5, 5)
        while len(sent.accepted) < target and not sent.done.is_set():
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.05))
        gw.kill()
        kills += 1
        time.sleep(rng.uniform(0.0, 0.2))  # the sender meets a dead port for a moment
        gw.start()
    # One more kill while a slow turn is running (after the last restart it is requeued and run again).
    with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=httpx.Timeout(2.0), trust_env=False) as c:
        until = time.monotonic() + 8
        while time.monotonic() < until and not running_slow_run(c, sent):
            time.sleep(0.02)
        if running_slow_run(c, sent):
            mid_turn_kills += 1
    gw.kill()
    kills += 1
    gw.start()

    sender.join(timeout=max(1.0, deadline - time.monotonic()))
    assert not sender.is_alive(), "the sender did not finish"
    assert sent.error is None, f"the sender failed: {sent.error!r}"
    assert kills >= 5

    with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=httpx.Timeout(5.0), trust_env=False) as c:
        # Wait until no run is queued or running.
        runs: dict[int, dict[str, Any]] = {}
        while True:
            runs = {i: c.get(f"/v1/runs/{run_id}").json() for i, run_id in sent.run_ids.items()}
            if all(run["status"] in TERMINAL for run in runs.values()):
                break
            pending = [(i, run["status"]) for i, run in runs.items() if run["status"] not in TERMINAL]
            assert time.monotonic() - started < TEST_BUDGET, f"runs still pending at the end: {pending}"
            time.sleep(0.1)
        r = c.get(f"/api/sessions/{sid}/messages")
        assert r.status_code == 200, r.text
        msgs: list[dict[str, Any]] = r.json()["data"]

    summary = (
        f"{kills} kills ({mid_turn_kills} during a slow turn), {sent.retries} retries, {sent.replays} replays, "
        f"runs interrupted and rerun: {sum(1 for run in runs.values() if run.get('attempts', 1) > 1)}"
    )
    print(summary)

    # Every message accepted, each under one run, whatever the retries.
    assert sorted(sent.run_ids) == list(range(COUNT)), summary
    assert not sent.other_run_ids, sent.other_run_ids
    assert len(set(sent.run_ids.values())) == COUNT, "two messages share a run"
    assert not sent.bad_answers, sent.bad_answers[:10]

    # Every run completed, with its own reply.
    not_completed = {i: (run["status"], run.get("error")) for i, run in runs.items() if run["status"] != "completed"}
    assert not not_completed, (not_completed, summary)
    for i, run in runs.items():
        assert token(i) in run.get("output", ""), (i, run)

    # The session: each message exactly once, in the order first accepted, each followed by its one reply.
    users = [m for m in msgs if m["role"] == "user"]
    user_tokens = [next((t for t in (token(i) for i in range(COUNT)) if t in m["content"]), None) for m in users]
    duplicates = sorted({t for t in user_tokens if t is not None and user_tokens.count(t) > 1})
    missing = sorted(set(map(token, range(COUNT))) - set(user_tokens))
    assert not duplicates, f"handled more than once: {duplicates} ({summary})"
    assert not missing, f"lost: {missing} ({summary})"
    assert user_tokens == [token(i) for i in sent.accepted], "the session's order is not the order of acceptance"
    for index, m in enumerate(msgs):
        if m["role"] != "user":
            continue
        t = next(t for t in (token(i) for i in range(COUNT)) if t in m["content"])
        replies = []
        for later in msgs[index + 1 :]:
            if later["role"] == "user":
                break
            if later["role"] == "assistant" and later.get("content"):
                replies.append(later)
        assert len(replies) == 1, (t, replies)
        assert t in replies[0]["content"], (t, replies[0])
        # the message and its reply are both the run's, the one its sender was given
        expected_run = sent.run_ids[int(t.rsplit("-", 1)[1])]
        assert m.get("run_id") == expected_run, (t, expected_run, m)
        assert replies[0].get("run_id") == expected_run, (t, expected_run, replies[0])
    assert len(msgs) == 2 * COUNT, f"{len(msgs)} messages for {COUNT} turns"

    # Runs were created in the order the messages were accepted.
    created = [runs[i]["created_at"] for i in sent.accepted]
    assert created == sorted(created), "run creation order differs from acceptance order"
    assert time.monotonic() - started < TEST_BUDGET
    assert api_key(gw.root) not in gw.log(), "the gateway logged its API key"
