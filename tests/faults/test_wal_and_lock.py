"""The WAL after a flood, and another process holding the write lock.

Contract (issue 11 items 6 and 7, README "Reliability"): once writes stop, the -wal file is emptied
(a TRUNCATE checkpoint when idle; journal_size_limit caps what a restarted WAL keeps), so a flood
does not leave it at its largest size for good. A write lock held by another process never freezes
the event loop: /health answers while the lock is held, and a write sent meanwhile waits off the loop
and completes once the lock is released, saved once.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from backchannel.home import config
from conftest import GatewayProcess
from store_audit import audit_texts


@pytest.fixture
def gateway(gateway_process: GatewayProcess) -> GatewayProcess:
    """A gateway process of its own: these tests stop it and read the files it leaves."""
    return gateway_process


pytestmark = pytest.mark.faults

FLOOD = 1500
CLIENTS = 16
WAL_BOUND = 512 * 1024  # bytes: well under the flood's peak, and under journal_size_limit
IDLE_WITHIN = 15.0  # seconds for the gateway to notice it is idle and truncate
LOCK_SECONDS = 3.0  # under the store's 5 s busy timeout: the write waits and completes


def wal_size(root: Path) -> int:
    try:
        return config.db_path(root).with_name("state.db-wal").stat().st_size
    except FileNotFoundError:
        return 0


async def flood(gw: GatewayProcess, peak: list[int]) -> None:
    async with httpx.AsyncClient(base_url=gw.url, headers=gw.headers(), timeout=30, trust_env=False) as c:
        sids = [(await c.post("/api/sessions", json={})).json()["session"]["id"] for _ in range(CLIENTS)]
        counter = iter(range(FLOOD))

        async def one_client(sid: str) -> None:
            for i in counter:
                r = await c.post(f"/api/sessions/{sid}/chat", json={"message": f"flood-{i} " + "z" * 2000})
                assert r.status_code == 200, r.text
                peak[0] = max(peak[0], wal_size(gw.root))

        await asyncio.gather(*(one_client(sid) for sid in sids))


def test_the_wal_shrinks_below_a_bound_once_a_flood_is_over(gateway: GatewayProcess) -> None:
    peak = [0]
    asyncio.run(flood(gateway, peak))
    assert peak[0] > 4 * WAL_BOUND, f"the flood grew the WAL to {peak[0]} bytes only"
    deadline = time.monotonic() + IDLE_WITHIN
    while wal_size(gateway.root) > WAL_BOUND and time.monotonic() < deadline:
        time.sleep(0.2)
    assert wal_size(gateway.root) <= WAL_BOUND, (
        f"the WAL is {wal_size(gateway.root)} bytes {IDLE_WITHIN:.0f}s after the flood (peak {peak[0]})"
    )
    with httpx.Client(base_url=gateway.url, headers=gateway.headers(), timeout=10, trust_env=False) as c:
        r = c.post("/api/sessions", json={})  # and it goes on working from the emptied WAL
        assert r.status_code == 201, r.text


HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
print("released", flush=True)
"""


def test_a_write_lock_held_elsewhere_never_freezes_the_gateway(gateway: GatewayProcess) -> None:
    with httpx.Client(base_url=gateway.url, headers=gateway.headers(), timeout=30, trust_env=False) as c:
        sid = c.post("/api/sessions", json={"title": "locked"}).json()["session"]["id"]
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(config.db_path(gateway.root)), str(LOCK_SECONDS)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ},
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            answers: dict[str, httpx.Response] = {}

            def write() -> None:  # a write that needs the lock, sent while it is held
                with httpx.Client(base_url=gateway.url, headers=gateway.headers(), timeout=30, trust_env=False) as w:
                    answers["chat"] = w.post(
                        f"/api/sessions/{sid}/chat",
                        json={"message": "locked-out"},
                        headers={"Idempotency-Key": "k-locked-out"},
                    )

            writer = threading.Thread(target=write)
            writer.start()
            time.sleep(0.3)  # the write is waiting for the lock now
            health = c.get("/health")
            health_while_held = holder.poll() is None
            assert health.status_code == 200
            assert health_while_held, "/health answered only after the other process released the lock"
            writer.join(timeout=30)
            assert not writer.is_alive(), "the write never completed"
            assert holder.stdout.readline().strip() == "released"
        finally:
            holder.kill()
            holder.wait()
        chat = answers["chat"]
        assert chat.status_code == 200, chat.text
        assert "locked-out" in chat.json()["message"]["content"], chat.text
    assert gateway.terminate() == 0
    audit_texts(gateway.root, ["locked-out"])
