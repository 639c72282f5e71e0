"""`make bench` (PostgreSQL at a distance): how many connections a gateway's pool needs for 32 clients.

A gateway on a PostgreSQL store (tests/postgres.py's throwaway cluster, fsync on) reaches it through
tests/delay_proxy.py's `DelayProxy` at a one-way delay (5 ms by default). For each pool size (`store.pool_size`),
a gateway of its own, on a database of its own, is started and measured, interleaved over rounds: turns per second
with 32 clients, each on a session of its own (the echo engine, a new text each time). The default
(`store.pool_size`, home/home_file.py) is right when the next size up adds little.

    .venv/bin/python bench/pool.py [--rounds 3] [--duration 3] [--delay 5] [--sizes 4,8,16,32]
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from common import Gateway, median, new_home, start_gateway
from round_trips import through
from run import save
from shared import SERVER_SETTINGS, on_store, throughput

import postgres
from delay_proxy import DelayProxy

CLIENTS = 32


def with_pool(home: Path, size: int) -> None:
    cfg = home / "config.yaml"
    data = yaml.safe_load(cfg.read_text())
    data["store"]["pool_size"] = size
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))


async def main(args: argparse.Namespace) -> dict[str, Any]:
    why = postgres.missing_reason()
    if why is not None:
        raise SystemExit(f"bench/pool.py: {why}")
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, Any] = {
        "machine": platform.platform(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "one_way_ms": args.delay,
        "clients": CLIENTS,
    }
    with postgres.cluster(SERVER_SETTINGS) as cluster:
        urls = {size: cluster.new_database(f"pool{size}") for size in sizes}  # a store each: nothing shared
        parts = urllib.parse.urlsplit(urls[sizes[0]])
        proxy = DelayProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
        await proxy.start()
        proxy.delay = args.delay / 1000
        gateways: dict[int, Gateway] = {}
        try:
            for size in sizes:
                home = new_home(f"bench-pool-{size}-")
                on_store(home, through(urls[size], proxy.port))
                with_pool(home, size)
                gateways[size] = await asyncio.to_thread(start_gateway, home)  # the proxy serves it meanwhile
            rates: dict[int, list[float]] = {size: [] for size in sizes}
            for _ in range(args.rounds):  # interleaved: a slow spell of the machine hits every size alike
                for size in sizes:
                    rates[size].append(await throughput([gateways[size]], CLIENTS, args.duration))
            results["turns_per_s"] = {str(size): median(r) for size, r in rates.items()}
        finally:
            for gw in gateways.values():
                await asyncio.to_thread(gw.stop)
            await proxy.stop()
    out = save("bench-pool", results)
    print(f"turns/s with {CLIENTS} clients, one gateway, {args.delay:g} ms one-way to PostgreSQL, by pool size")
    best = max(results["turns_per_s"].values())
    for size, rate in results["turns_per_s"].items():
        print(f"  pool {size:>3}: {rate:7.1f} turns/s  ({rate / best:.2f} of the best)")
    print(f"\nwritten to {out}")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=3.0, help="seconds of each throughput window")
    parser.add_argument("--delay", type=float, default=5.0, help="one-way delay to PostgreSQL, ms")
    parser.add_argument("--sizes", default="4,8,16,32", help="pool sizes, comma-separated")
    asyncio.run(main(parser.parse_args()))
