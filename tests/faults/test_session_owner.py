"""One owning gateway per session on a shared PostgreSQL store, fenced by an epoch (issue 41).

Two gateways on one store. A gateway paused (SIGSTOP) past its lease in the middle of a turn loses the session to
the other, which runs the turn again under the next epoch; the paused one's late end, once it resumes, is refused:
the turn's message and reply are in the session once. A SIGKILLed gateway's sessions are taken by the other within
3 s: its running turn runs again there, and the sessions it owned are owned by the other (or by nobody) at once.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from backchannel.home import config
from conftest import GatewayProcess, free_port, use_shared_store
from store_audit import audit_key, runs_by_key, session_owners

pytestmark = pytest.mark.faults

TAKEN_WITHIN = 3.0  # a killed owner's sessions are taken within this (issue 41)


@pytest.fixture
def two_gateways(initialised: Path, postgres_url: str, tmp_path: Path) -> Iterator[list[GatewayProcess]]:
    use_shared_store(initialised, postgres_url)
    cfg = config.config_path(initialised)
    data = config.load_yaml(cfg)
    data["store"]["lease_seconds"] = 2
    config.write_yaml(cfg, data)
    other = tmp_path / "home-1"
    shutil.copytree(initialised, other, ignore=shutil.ignore_patterns("state.db*", "gateway*", "*.log"))
    gateways = [GatewayProcess(initialised, free_port()), GatewayProcess(other, free_port())]
    try:
        for gw in gateways:
            gw.start()
        yield gateways
    finally:
        for gw in gateways:
            if gw.proc is not None and gw.proc.poll() is None:
                os.kill(gw.proc.pid, signal.SIGCONT)
            gw.kill()


def new_session(gw: GatewayProcess, title: str) -> str:
    r = httpx.post(f"{gw.url}/api/sessions", json={"title": title}, headers=gw.headers(), timeout=10, trust_env=False)
    assert r.status_code == 201, r.text
    return str(r.json()["session"]["id"])


def chat(gw: GatewayProcess, session: str, message: str, key: str, *, wait: str = "0.05") -> str:
    r = httpx.post(
        f"{gw.url}/api/sessions/{session}/chat",
        json={"message": message},
        headers=gw.headers(**{"Idempotency-Key": key, "X-Hermes-Wait-Seconds": wait}),
        timeout=30,
        trust_env=False,
    )
    assert r.status_code in (200, 202), r.text
    return str(r.json()["run_id"])


def mark_of(gw: GatewayProcess, owner: str | None) -> bool:
    """Whether an owner mark (`host:pid:token`) is this gateway process's."""
    assert gw.proc is not None
    return owner is not None and owner.split(":")[1] == str(gw.proc.pid)


def until(what: str, check: object, seconds: float) -> float:
    """Wait for `check()` to hold; the seconds it took."""
    started = time.monotonic()
    while not check():  # type: ignore[operator]
        assert time.monotonic() - started < seconds, f"{what}: not within {seconds:g}s"
        time.sleep(0.05)
    return time.monotonic() - started


def test_a_paused_owners_late_end_is_refused_once_the_other_gateway_took_its_session(
    two_gateways: list[GatewayProcess],
) -> None:
    first, second = two_gateways
    sid = new_session(first, "paused owner")
    chat(first, sid, "warm-up", "owner-warm")  # the first gateway owns the session
    until("the warm-up answered", lambda: runs_by_key(first.root, "owner-warm")[0]["state"] == "completed", 20)
    owner, epoch = session_owners(first.root)[sid]
    assert mark_of(first, owner), owner
    chat(first, sid, "/sleep 3\npaused-turn", "owner-paused")
    until("the slow turn running", lambda: runs_by_key(first.root, "owner-paused")[0]["state"] == "running", 20)
    assert first.proc is not None
    os.kill(first.proc.pid, signal.SIGSTOP)  # paused past its lease (2 s) while its turn sleeps
    try:
        until(
            "the second gateway took the session",
            lambda: mark_of(second, session_owners(first.root)[sid][0]),
            20,
        )
        assert session_owners(first.root)[sid][1] > epoch  # under the next epoch
        until("the turn run again", lambda: runs_by_key(first.root, "owner-paused")[0]["state"] == "completed", 30)
    finally:
        os.kill(first.proc.pid, signal.SIGCONT)  # its turn ends at once: its late end must be refused
    time.sleep(2.0)
    run = audit_key(first.root, "owner-paused").run  # its message and its reply in the session once each
    assert run["attempts"] == 2, run
    assert "paused-turn" in run["reply"], run
    assert mark_of(second, session_owners(first.root)[sid][0])
    assert first.log_path is not None
    assert "no longer ours to finish" in first.log_path.read_text()  # the paused gateway's late end, refused
    chat(first, sid, "after", "owner-after")  # the resumed gateway records; the owner runs it
    until("the next message answered", lambda: runs_by_key(first.root, "owner-after")[0]["state"] == "completed", 20)
    assert mark_of(second, session_owners(first.root)[sid][0])


def test_a_killed_owners_sessions_are_taken_within_three_seconds(two_gateways: list[GatewayProcess]) -> None:
    first, second = two_gateways
    sessions = [new_session(first, f"killed owner {n}") for n in range(3)]
    for n, sid in enumerate(sessions):
        chat(first, sid, f"warm-up {n}", f"killed-warm-{n}", wait="10")
    owners = session_owners(first.root)
    assert all(mark_of(first, owners[sid][0]) for sid in sessions), owners
    chat(first, sessions[0], "/sleep 1\nkilled-turn", "killed-turn")
    until("the slow turn running", lambda: runs_by_key(first.root, "killed-turn")[0]["state"] == "running", 20)
    first.kill()
    killed_at = time.time()
    took = until(
        "the killed gateway's sessions freed or taken",
        lambda: not any(mark_of(first, session_owners(second.root)[sid][0]) for sid in sessions),
        TAKEN_WITHIN + 2,
    )
    assert took <= TAKEN_WITHIN, f"{took:.2f}s"
    until("its turn run again", lambda: runs_by_key(second.root, "killed-turn")[0]["state"] == "completed", 20)
    run = audit_key(second.root, "killed-turn").run
    assert run["started_at"] - killed_at <= TAKEN_WITHIN, run  # its turn started again within the bound
    assert mark_of(second, session_owners(second.root)[sessions[0]][0])
    for n, sid in enumerate(sessions[1:], 1):  # a session it owned idle: the other takes it at its next message
        chat(second, sid, f"after {n}", f"killed-after-{n}", wait="10")
        assert runs_by_key(second.root, f"killed-after-{n}")[0]["state"] == "completed"
        assert mark_of(second, session_owners(second.root)[sid][0])
