"""`make bench` (PostgreSQL at a distance): what a chat turn costs in round trips to the store, and its time as the
store moves away, beside the floor of one round trip measured through the same proxy in the same run.

A gateway on a PostgreSQL store (tests/postgres.py's throwaway cluster, fsync on) reaches it through
tests/delay_proxy.py's `DelayProxy`, which delays each byte by the one-way delay and counts the client's bursts (a
burst is a round trip the gateway waited for). Measured, each as a median of rounds:
- round trips on a turn's reply path: from the request to its answer;
- round trips per turn in all: the same, and until AFTER_SECONDS past its answer;
  each as the median of the turns' own counts and as their mean with the gateway's idle background (its bursts a
  second with no turn) subtracted. The background's jobs come in batches: over a reply's few milliseconds the
  median is the steadier figure (shown first); over the 100 ms after it, the background weighs on the median and
  the mean is (shown first);
- turn p50 at each one-way delay, beside one round trip's floor (a durable INSERT and UPDATE sent as one
  statement by asyncpg through the proxy) at the same delay.

    .venv/bin/python bench/round_trips.py [--rounds 3] [--n 30] [--delays 0,2,5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from common import median, new_home, start_gateway
from run import chat_request, new_session, save, sequential
from shared import SERVER_SETTINGS, on_store

import postgres
from delay_proxy import DelayProxy

SETTLE_SECONDS = 1.0  # after the last turn of a round, before the next measure
AFTER_SECONDS = 0.1  # after each answer: what its turn set going then (a notice, a wake) is counted in all
IDLE_SECONDS = 3.0
BUMP = "UPDATE bench_floor SET n = n + 1 WHERE id = 1"


def through(url: str, port: int) -> str:
    parts = urllib.parse.urlsplit(url)
    auth = parts.netloc.rsplit("@", 1)[0]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{auth}@127.0.0.1:{port}"))


async def idle_rate(proxy: DelayProxy) -> float:
    """The gateway's own bursts a second while nothing is asked of it."""
    before, start = proxy.round_trips, time.monotonic()
    await asyncio.sleep(IDLE_SECONDS)
    return (proxy.round_trips - before) / (time.monotonic() - start)


async def counted_turns(
    s: aiohttp.ClientSession, proxy: DelayProxy, turn: Any, n: int, idle: float
) -> tuple[float, float, float, float]:
    """Round trips a turn: on the reply path, and in all (until `AFTER_SECONDS` past its answer), each as the median
    of the turns' own counts (what a turn costs, whatever the background did meanwhile) and as the mean with the
    idle rate subtracted (what turns cost on average, their rare extra work included)."""
    replies: list[float] = []
    totals: list[float] = []
    reply_idle = total_idle = 0.0
    for _ in range(n):
        t0, b0 = time.monotonic(), proxy.round_trips
        await turn()
        t1, b1 = time.monotonic(), proxy.round_trips
        await asyncio.sleep(AFTER_SECONDS)
        t2, b2 = time.monotonic(), proxy.round_trips
        replies.append(b1 - b0)
        totals.append(b2 - b0)
        reply_idle += idle * (t1 - t0)
        total_idle += idle * (t2 - t0)
    await asyncio.sleep(SETTLE_SECONDS)  # what the last turn set going, out of the next measure
    return median(replies), median(totals), (sum(replies) - reply_idle) / n, (sum(totals) - total_idle) / n


async def floor(url: str, n: int) -> list[float]:
    """One round trip that lasts: a durable INSERT and an UPDATE, one simple-protocol statement."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (id serial PRIMARY KEY, n int)")
        out = []
        for i in range(n):
            t = time.perf_counter()
            await conn.execute(f"INSERT INTO bench_floor (n) VALUES ({i}); {BUMP}")
            out.append(time.perf_counter() - t)
        return out
    finally:
        await conn.close()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    why = postgres.missing_reason()
    if why is not None:
        raise SystemExit(f"bench/round_trips.py: {why}")
    delays = [float(d) / 1000 for d in args.delays.split(",")]
    results: dict[str, Any] = {"machine": platform.platform(), "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    with postgres.cluster(SERVER_SETTINGS) as cluster:
        url = cluster.new_database("rt")
        parts = urllib.parse.urlsplit(url)
        proxy = DelayProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
        await proxy.start()
        home = new_home("bench-rt-")
        on_store(home, through(url, proxy.port))
        gw = await asyncio.to_thread(start_gateway, home)  # the proxy serves it meanwhile, in this loop
        try:
            async with aiohttp.ClientSession() as s:
                sid = await new_session(s, gw, f"rt-{time.monotonic_ns()}")
                counter = [0]

                async def turn() -> list[float]:
                    m, u, kw = chat_request(gw, sid, counter)  # a new text each time
                    return await sequential(s, m, u, 1, **kw)

                for _ in range(5):
                    await turn()
                rounds: list[tuple[float, float, float, float]] = []
                idles: list[float] = []
                for _ in range(args.rounds):
                    idle = await idle_rate(proxy)
                    rounds.append(await counted_turns(s, proxy, turn, args.n, idle))
                    idles.append(idle)
                results["round_trips"] = {
                    "reply_path": median([r[0] for r in rounds]),  # the turns' own median: a few ms of window
                    "per_turn": median([r[3] for r in rounds]),  # the mean, idle subtracted: a window 100 ms longer
                    "reply_path_mean": median([r[2] for r in rounds]),
                    "per_turn_median": median([r[1] for r in rounds]),
                    "idle_per_s": median(idles),
                }
                at: dict[str, dict[str, float]] = {}
                for delay in delays:
                    proxy.delay = delay
                    turns: list[float] = []
                    floors: list[float] = []
                    for _ in range(args.rounds):
                        for _ in range(args.n // 3 or 1):
                            turns += await turn()
                        floors += await floor(through(url, proxy.port), args.n // 3 or 1)
                    at[f"{delay * 1000:g}"] = {"turn_p50_ms": median(turns) * 1e3, "floor_p50_ms": median(floors) * 1e3}
                results["delay"] = at
        finally:
            await asyncio.to_thread(gw.stop)
            await proxy.stop()
    out = save("bench-round-trips", results)
    rt = results["round_trips"]
    print(f"{'measure':<58} {'figures':<26} target")
    both = f"{rt['reply_path']:.1f} (mean {rt['reply_path_mean']:.1f})"
    print(f"{'round trips to PostgreSQL on the reply path of a turn':<58} {both:<26} <= 3")
    both = f"{rt['per_turn']:.1f} (median {rt['per_turn_median']:.1f})"
    print(f"{'round trips per turn in all (mean, idle subtracted)':<58} {both:<26} <= 4")
    print(f"{'  the gateway idle (its background jobs), a second':<58} {rt['idle_per_s']:<26.1f}")
    for delay, fig in results["delay"].items():
        ratio = fig["turn_p50_ms"] / fig["floor_p50_ms"]
        what = f"turn p50 vs one round trip, {delay} ms one-way"
        shown = f"{fig['turn_p50_ms']:.1f} vs {fig['floor_p50_ms']:.1f} ms = {ratio:.1f}x"
        print(f"{what:<58} {shown:<26} {'<= 3x' if delay == '5' else ''}")
    print(f"\nwritten to {out}")
    if args.json:
        print(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--delays", default="0,2,5", help="one-way delays in ms, comma-separated")
    parser.add_argument("--json", action="store_true")
    asyncio.run(main(parser.parse_args()))
