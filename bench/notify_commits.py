"""`make bench` (PostgreSQL notices): what announcing changes costs the store's commits, bare.

PostgreSQL serialises the commits of transactions that NOTIFY (a cluster-wide lock held through the commit's WAL
flush), so commits that notify cannot be flushed together. Measured on tests/postgres.py's throwaway cluster with
the server's default durability (fsync on), 16 connections each committing one-row INSERTs as fast as they can
(each statement its own commit), for a window each, in interleaved rounds:
- bare: no notice;
- after commit: each commit's payload handed to `store.pg_notices.Notices`, the store's own batcher, which sends
  them after the commit, coalesced, one `pg_notify` statement a batch (what the store does);
- inside the commit: the INSERT and its `pg_notify` in one statement, one transaction (what the store did).
Printed: commits a second of each, and each against bare (target: after commit >= 0.9x).

    .venv/bin/python bench/notify_commits.py [--rounds 3] [--duration 3] [--clients 16] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from common import median
from run import save
from shared import SERVER_SETTINGS

import postgres
from backchannel.store.driver import CHANGES_CHANNEL
from backchannel.store.pg_notices import Notices

INSERT = "INSERT INTO commits (payload) VALUES ($1)"
INSERT_NOTIFYING = (
    f"WITH ins AS (INSERT INTO commits (payload) VALUES ($1) RETURNING payload) "
    f"SELECT pg_notify('{CHANGES_CHANNEL}', payload) FROM ins"
)


async def window(pool: asyncpg.Pool[Any], pattern: str, clients: int, duration: float) -> float:
    """Commits a second of `pattern` over one window of `duration` seconds."""

    @asynccontextmanager
    async def connection() -> AsyncIterator[Any]:
        async with pool.acquire() as conn:
            yield conn

    notices = Notices(connection, name="bench")
    if pattern == "after commit":
        notices.start()
    done = 0
    stop_at = time.monotonic() + duration

    async def client(k: int) -> None:
        nonlocal done
        n = 0
        while time.monotonic() < stop_at:
            payload = f"run_{k}_{n}_{time.time_ns()}"
            async with pool.acquire() as conn:
                await conn.execute(INSERT_NOTIFYING if pattern == "inside the commit" else INSERT, payload)
            if pattern == "after commit":
                notices.committed([payload])
            n += 1
            done += 1

    started = time.monotonic()
    await asyncio.gather(*(client(k) for k in range(clients)))
    if pattern == "after commit":
        await notices.flushed()  # the window counts the notices' own statements too
        await notices.close()
    return done / (time.monotonic() - started)


async def main(args: argparse.Namespace) -> None:
    why = postgres.missing_reason()
    if why is not None:
        raise SystemExit(f"bench/notify_commits.py: {why}")
    patterns = ("bare", "after commit", "inside the commit")
    rates: dict[str, list[float]] = {p: [] for p in patterns}
    with postgres.cluster(SERVER_SETTINGS) as cluster:
        url = cluster.new_database("commits")
        pool = await asyncpg.create_pool(url, min_size=args.clients + 2, max_size=args.clients + 2)
        try:
            await pool.execute("CREATE TABLE commits (seq bigserial PRIMARY KEY, payload text NOT NULL)")
            listener = await asyncpg.connect(url)  # notices are delivered somewhere, as on a gateway
            await listener.add_listener(CHANGES_CHANNEL, lambda *_: None)
            for n in range(args.rounds):
                order = patterns if n % 2 == 0 else tuple(reversed(patterns))
                for pattern in order:
                    rates[pattern].append(await window(pool, pattern, args.clients, args.duration))
            await listener.close()
        finally:
            await pool.close()
    results: dict[str, Any] = {
        "machine": platform.platform(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "clients": args.clients,
        "commits_per_s": {p: median(v) for p, v in rates.items()},
    }
    out = save("bench-notify-commits", results)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    c = results["commits_per_s"]
    print(f"{'PostgreSQL commits/s, ' + str(args.clients) + ' connections, fsync on':<52} {'figures':<12} vs bare")
    for p in patterns:
        target = "   (target >= 0.9x)" if p == "after commit" else ""
        print(f"{'  ' + p:<52} {c[p]:<12.0f} {c[p] / c['bare']:.2f}x{target}")
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--json", action="store_true")
    asyncio.run(main(parser.parse_args()))
