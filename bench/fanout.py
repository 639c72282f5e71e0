"""`make bench`: costs as followers and queues grow, in one run.

- FOLLOWERS clients follow one run's events (`GET /v1/runs/{id}/events`, server-sent events): the gateway's
  memory per follower, and how long after the run ends the last follower has its end event.
- QUEUED runs wait on one session (written straight into the store while the gateway is stopped, as a backlog
  after an outage would be): the first and the last thousand turns' rate as the gateway drains them, a claim's
  cost as the queue shortens (flat: the ratio near 1).

    python bench/fanout.py [--followers 1000] [--queued 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Gateway, new_home, start_gateway
from run import new_session, print_rows, save

STEP = 1000  # turns per drain-rate window


async def followers(gw: Gateway, count: int) -> dict[str, Any]:
    """`count` followers of one run that sleeps, then the time from its end to the last follower's end event."""
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=None)) as s:
        sid = await new_session(s, gw, "followed")
        async with s.post(
            f"{gw.url}/v1/runs", json={"input": "/sleep 4\nthe end", "session_id": sid}, headers=gw.headers
        ) as r:
            run_id = (await r.json())["run_id"]
        before = gw.rss_kib()
        ready = asyncio.Event()
        opened: list[int] = []
        ended: list[float] = []

        async def follow() -> None:
            async with s.get(f"{gw.url}/v1/runs/{run_id}/events", headers=gw.headers) as r:
                opened.append(r.status)
                if len(opened) == count:
                    ready.set()
                async for line in r.content:
                    if line.startswith(b"data:") and b'"run.completed"' in line:
                        ended.append(time.perf_counter())
                        return

        tasks = [asyncio.create_task(follow()) for _ in range(count)]
        await asyncio.wait_for(ready.wait(), 60)
        await asyncio.sleep(0.5)
        during = gw.rss_kib()
        # The end as the run's own poller sees it: the first moment its state reads completed.
        while True:
            async with s.get(f"{gw.url}/v1/runs/{run_id}", headers=gw.headers) as r:
                if (await r.json())["status"] == "completed":
                    done_at = time.perf_counter()
                    break
            await asyncio.sleep(0.005)
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
    return {
        "followers": count,
        "opened_ok": sum(1 for status in opened if status == 200),
        "ended": len(ended),
        "rss_per_follower_kib": (during - before) / count,
        "fan_out_ms": (max(ended) - done_at) * 1e3 if ended else None,
    }


def backlog(home: Path, count: int) -> None:
    """`count` runs queued on one new session, oldest first, written straight into the stopped gateway's store."""
    now = time.time()
    with sqlite3.connect(home / "state.db") as db:
        sid = "20260101_000000_backlog"
        db.execute(
            "INSERT INTO sessions (id, profile, title, source, created_at, updated_at, message_count)"
            " VALUES (?, 'default', 'backlog', 'api', ?, ?, 0)",
            (sid, now, now),
        )
        rows = []
        for n in range(count):
            run_id = f"run_{uuid.uuid4().hex}"
            at = now - count + n
            rows.append((run_id, f"cli-{run_id}", run_id[4:28], "human:cli", sid, f"queued {n}", at, at, run_id))
        db.executemany(
            "INSERT INTO runs (id, idempotency_key, fingerprint, sender, profile, session_id, message, state,"
            " created_at, updated_at, origin, landed)"
            " VALUES (?, ?, ?, ?, 'default', ?, ?, 'queued', ?, ?, ?, 'queued')",
            rows,
        )


def drained(home: Path, count: int) -> list[float]:
    """When each run of the backlog finished, in claim order (seconds, as the store says)."""
    with sqlite3.connect(home / "state.db") as db:
        rows = db.execute(
            "SELECT finished_at FROM runs WHERE session_id = '20260101_000000_backlog' AND state = 'completed'"
            " ORDER BY seq"
        ).fetchall()
    return [r[0] for r in rows][:count]


async def queue(count: int) -> dict[str, Any]:
    home = new_home("fanout-queue-")
    start_gateway(home).stop()  # the store's schema, as a first start writes it
    backlog(home, count)
    gw = start_gateway(home)
    try:
        deadline = time.monotonic() + 600
        while len(drained(home, count)) < count:
            assert time.monotonic() < deadline, "the backlog did not drain within 10 minutes"
            await asyncio.sleep(0.5)
    finally:
        gw.stop()
    ends = drained(home, count)
    first = STEP / (ends[STEP - 1] - ends[0])
    last = STEP / (ends[-1] - ends[-STEP])
    return {"queued": count, "first_per_s": first, "last_per_s": last, "ratio": last / first}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    gw = start_gateway(new_home("fanout-followers-"))
    try:
        results: dict[str, Any] = {"followers": await followers(gw, args.followers)}
    finally:
        gw.stop()
    results["queue"] = await queue(args.queued)
    return results


def table(r: dict[str, Any]) -> None:
    f, q = r["followers"], r["queue"]
    fan = f"{f['fan_out_ms']:.0f} ms" if f["fan_out_ms"] is not None else "none ended"
    print_rows(
        [
            (
                f"{f['followers']} followers of one run",
                f"{f['opened_ok']} open, {f['ended']} told its end; {fan} from its end to the last",
                f"{f['rss_per_follower_kib']:.1f} KiB each",
                "all told",
                f["ended"] == f["followers"],
            ),
            (
                f"{q['queued']:,} runs queued on one session: last {STEP} vs first {STEP}",
                f"{q['last_per_s']:.0f} vs {q['first_per_s']:.0f} turns/s",
                f"{q['ratio']:.2f}x",
                "flat (>= 0.8x)",
                q["ratio"] >= 0.8,
            ),
        ]
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--followers", type=int, default=1000)
    parser.add_argument("--queued", type=int, default=10_000)
    results = asyncio.run(main(parser.parse_args()))
    out = save("fanout", results)
    table(results)
    print(f"\nwritten to {out}")
