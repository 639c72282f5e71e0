"""`make bench` (second part): the turn on PostgreSQL beside the turn on SQLite, and gateways sharing one store.

In one run, on the same machine, medians over interleaved rounds:
- a person's chat turn (echo engine) through a gateway on its own state.db and through one on a PostgreSQL store
  (tests/postgres.py's throwaway cluster, with the server's default durability: fsync on): sequential p50, and
  turns per second with 32 clients;
- turns per second with 32 clients spread over 1, 2 and 3 gateways on one PostgreSQL store.

Needs `make postgres` and the postgres extra (asyncpg).
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import shutil
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import aiohttp
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from common import Gateway, median, new_home, start_gateway
from run import chat_request, concurrent, new_session, save, sequential

import postgres

SERVER_SETTINGS = {"max_connections": "200"}  # fsync and the rest at the server's defaults


def on_store(home: Path, url: str) -> None:
    """The home's store: the PostgreSQL database at `url` (its password into .env, as a person would put it)."""
    parts = urllib.parse.urlsplit(url)
    plain = urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}@{parts.hostname}:{parts.port}"))
    cfg = home / "config.yaml"
    data = yaml.safe_load(cfg.read_text())
    data["store"] = {"url": plain}
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    with (home / ".env").open("a") as env:
        env.write(f"BACKCHANNEL_STORE_PASSWORD={urllib.parse.unquote(parts.password or '')}\n")


def copy_home(home: Path) -> Path:
    """Another home deployed like `home` (the same files), for another gateway on the same store."""
    other = Path(str(home) + f"-{time.monotonic_ns()}")
    shutil.copytree(home, other, ignore=shutil.ignore_patterns("state.db*", "gateway*", "*.log"))
    cfg = other / "config.yaml"
    data = yaml.safe_load(cfg.read_text())
    data["gateway"]["port"] = 8377  # start_gateway gives it a port of its own
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    return other


async def turns(gw: Gateway, rounds: int, n: int) -> list[float]:
    async with aiohttp.ClientSession() as s:
        sid = await new_session(s, gw, f"bench-shared-{time.monotonic_ns()}")
        counter = [0]
        out: list[float] = []
        for _ in range(rounds):
            for _ in range(n):
                m, u, kw = chat_request(gw, sid, counter)
                out += await sequential(s, m, u, 1, **kw)
    return out


async def throughput(gateways: list[Gateway], clients: int, duration: float) -> float:
    """Turns per second, `clients` loops each on a session of its own, spread over `gateways` in turn."""
    conn = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=conn) as s:
        tag = time.monotonic_ns()
        sids = [await new_session(s, gateways[i % len(gateways)], f"tp-{tag}-{i}") for i in range(clients)]
        counter = [0]
        return await concurrent(
            s, clients, duration, lambda i: chat_request(gateways[i % len(gateways)], sids[i], counter)
        )


async def main(args: argparse.Namespace) -> None:
    why = postgres.missing_reason()
    if why is not None:
        raise SystemExit(f"bench/shared.py: {why}")
    results: dict[str, Any] = {"machine": platform.platform(), "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    with postgres.cluster(SERVER_SETTINGS) as cluster:
        lite_home = new_home("bench-sqlite-")
        pg_home = new_home("bench-pg-")
        on_store(pg_home, cluster.new_database("bench"))
        lite, pg = start_gateway(lite_home), start_gateway(pg_home)
        more: list[Gateway] = []
        try:
            lite_t: list[float] = []
            pg_t: list[float] = []
            lite_s: list[float] = []
            pg_s: list[float] = []
            for _ in range(args.rounds):  # interleaved: a slow spell of the machine hits both alike
                lite_t += await turns(lite, 1, args.n)
                pg_t += await turns(pg, 1, args.n)
                lite_s.append(await throughput([lite], 32, args.duration))
                pg_s.append(await throughput([pg], 32, args.duration))
            results["turn"] = {
                "sqlite_p50_ms": median(lite_t) * 1e3,
                "postgresql_p50_ms": median(pg_t) * 1e3,
                "sqlite_turns_per_s_32": median(lite_s),
                "postgresql_turns_per_s_32": median(pg_s),
            }
            more = [start_gateway(copy_home(pg_home)) for _ in range(2)]
            by_count: dict[int, list[float]] = {1: [], 2: [], 3: []}
            for _ in range(args.rounds):
                for count in (1, 2, 3):
                    by_count[count].append(await throughput([pg, *more][:count], 32, args.duration))
            results["gateways"] = {str(k): median(v) for k, v in by_count.items()}
        finally:
            for gw in (lite, pg, *more):
                gw.stop()
    out = save("bench-shared", results)
    t, g = results["turn"], results["gateways"]
    print(f"{'measure':<52} {'figures':<34} ratio")
    print(
        f"{'turn p50: PostgreSQL store vs state.db':<52} "
        f"{t['postgresql_p50_ms']:.2f} vs {t['sqlite_p50_ms']:.2f} ms{'':<16} "
        f"{t['postgresql_p50_ms'] / t['sqlite_p50_ms']:.2f}x"
    )
    print(
        f"{'turns/s, 32 clients: PostgreSQL store vs state.db':<52} "
        f"{t['postgresql_turns_per_s_32']:.0f} vs {t['sqlite_turns_per_s_32']:.0f}{'':<22} "
        f"{t['postgresql_turns_per_s_32'] / t['sqlite_turns_per_s_32']:.2f}x"
    )
    print(
        f"{'turns/s, 32 clients over 1, 2, 3 gateways (one store)':<52} "
        f"{g['1']:.0f}, {g['2']:.0f}, {g['3']:.0f}{'':<18} {g['3'] / g['1']:.2f}x"
    )
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=60)
    parser.add_argument("--duration", type=float, default=2.0, help="seconds of each throughput window")
    asyncio.run(main(parser.parse_args()))
