"""`make bench` (PostgreSQL failover): how long a SIGKILLed gateway's running turn waits before another gateway of
the same store takes it up.

Two gateways on one PostgreSQL store (tests/postgres.py's throwaway cluster), the store's default lease. In each
round a slow turn (`/sleep`) is started on one; once the store shows it running, the gateway that claimed it is
SIGKILLed, and the store is read every 10 ms until the run is running again under another owner (or ended). The
killed one is started again for the next round. Printed: the median and the worst wait, beside the lease.

    .venv/bin/python bench/failover.py [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from common import Gateway, median, new_home, start_gateway
from run import save
from shared import SERVER_SETTINGS, copy_home, on_store

import postgres
from backchannel.home import config

PATIENCE = 120.0  # seconds a round waits for the turn to be taken up before it counts as never


async def owner_and_state(conn: asyncpg.Connection[Any], run_id: str) -> tuple[str | None, str]:
    row = await conn.fetchrow("SELECT owner, state FROM runs WHERE id = $1", run_id)
    return (row["owner"], row["state"]) if row is not None else (None, "absent")


async def one_round(gateways: list[Gateway], conn: asyncpg.Connection[Any], n: int) -> tuple[float, int]:
    """Seconds from the SIGKILL of the gateway that runs a slow turn until that turn runs under another owner (or
    ended), and which of `gateways` was killed."""
    asked = gateways[n % len(gateways)]
    started = httpx.post(
        f"{asked.url}/v1/runs", json={"input": f"/sleep 20\nfailover round {n} {time.time_ns()}"}, headers=asked.headers
    )
    started.raise_for_status()
    run_id = started.json()["run_id"]
    deadline = time.monotonic() + 30
    while (found := await owner_and_state(conn, run_id))[1] != "running" or found[0] is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} never ran: {found}")
        await asyncio.sleep(0.01)
    killed_owner = found[0]  # `host:pid:token`: the gateway that claimed it
    victim = next(i for i, gw in enumerate(gateways) if killed_owner.split(":")[1] == str(gw.proc.pid))
    gateways[victim].proc.kill()
    gateways[victim].proc.wait()
    killed_at = time.monotonic()
    while time.monotonic() - killed_at < PATIENCE:
        owner, state = await owner_and_state(conn, run_id)
        if state in {"completed", "failed", "cancelled", "expired"} or (state == "running" and owner != killed_owner):
            return time.monotonic() - killed_at, victim
        await asyncio.sleep(0.01)
    return float("inf"), victim


async def main(args: argparse.Namespace) -> None:
    why = postgres.missing_reason()
    if why is not None:
        raise SystemExit(f"bench/failover.py: {why}")
    results: dict[str, Any] = {"machine": platform.platform(), "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    with postgres.cluster(SERVER_SETTINGS) as cluster:
        home = new_home("bench-failover-")
        url = cluster.new_database("failover")
        on_store(home, url)
        lease = config.load_gateway_config(home).store.lease_seconds
        other_home = copy_home(home)
        gateways = [start_gateway(home), start_gateway(other_home)]
        conn = await asyncpg.connect(url)
        waits: list[float] = []
        try:
            for n in range(args.rounds):
                wait, victim = await one_round(gateways, conn, n)
                waits.append(wait)
                gateways[victim] = start_gateway(gateways[victim].home)
        finally:
            await conn.close()
            for gw in gateways:
                if gw.proc.poll() is None:
                    gw.stop()
    results["failover"] = {"waits_s": waits, "median_s": median(waits), "worst_s": max(waits), "lease_s": lease}
    out = save("bench-failover", results)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    f = results["failover"]
    what = "a SIGKILLed gateway's running turn taken up by another"
    print(f"{'measure':<60} {'figures':<26} target")
    print(
        f"{what:<60} "
        f"median {f['median_s']:.2f} s, worst {f['worst_s']:.2f} s   <= 3 s (lease {f['lease_s']:.0f} s)"
    )
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    asyncio.run(main(parser.parse_args()))
