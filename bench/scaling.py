"""`make bench` (gateways sharing one store): do more gateways add turns, each held to the same share of a CPU?

On one machine every gateway, the database and the load generator share the same cores, so more gateways cannot
show what they add on machines of their own. Here each gateway is held to the same CPU share (`--share`, a
fraction of one core) in a cgroup of its own (cgroup v1's cpu controller, or v2's cpu.max; needs root), the
store is PostgreSQL (tests/postgres.py's throwaway cluster, fsync on) reached through tests/delay_proxy.py's
`DelayProxy` at `--delay` ms one-way, and 32 clients, each on a session of its own, are spread over 1, 2 and 3
gateways in interleaved rounds (the echo engine, a new text each time). Printed: turns per second for each count,
3 vs 1, and each gateway's CPU seconds a turn (from /proc), which says whether the share or the store bounds it.
Where no cgroup can be made, the gateways run uncapped and the run says so (the figures then measure this
machine's cores, not the design).

    .venv/bin/python bench/scaling.py [--rounds 3] [--duration 4] [--delay 2] [--share 0.25]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from common import Gateway, median, new_home, start_gateway
from round_trips import through
from run import save
from shared import SERVER_SETTINGS, copy_home, on_store, throughput

import postgres
from delay_proxy import DelayProxy

CLIENTS = 32
PERIOD_US = 100_000
V1 = Path("/sys/fs/cgroup/cpu")
V2 = Path("/sys/fs/cgroup")


class CpuShare:
    """A cgroup holding processes to `share` of one core; `None` from `make` where none can be made."""

    def __init__(self, path: Path, v2: bool) -> None:
        self.path, self.v2 = path, v2

    @classmethod
    def make(cls, name: str, share: float) -> CpuShare | None:
        quota = int(share * PERIOD_US)
        if (V1 / "cpu.cfs_quota_us").exists():
            path, v2 = V1 / name, False
        elif (V2 / "cgroup.controllers").exists() and "cpu" in (V2 / "cgroup.subtree_control").read_text():
            path, v2 = V2 / name, True
        else:
            return None
        try:
            path.mkdir(exist_ok=True)
            if v2:
                (path / "cpu.max").write_text(f"{quota} {PERIOD_US}")
            else:
                (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (path / "cpu.cfs_quota_us").write_text(str(quota))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path, v2)

    def hold(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def remove(self) -> None:
        with contextlib.suppress(OSError):  # its processes ended: an empty cgroup can go
            self.path.rmdir()


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system) process `pid` has used, its threads included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def shares(count: int, share: float) -> Iterator[list[CpuShare | None]]:
    made = [CpuShare.make(f"backchannel-bench-{os.getpid()}-{n}", share) for n in range(count)]
    try:
        yield made
    finally:
        for cg in made:
            if cg is not None:
                cg.remove()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    why = postgres.missing_reason()
    if why is not None:
        raise SystemExit(f"bench/scaling.py: {why}")
    results: dict[str, Any] = {
        "machine": platform.platform(),
        "cores": os.cpu_count(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "one_way_ms": args.delay,
        "share_of_a_core": args.share,
        "clients": CLIENTS,
    }
    with postgres.cluster(SERVER_SETTINGS) as cluster, shares(3, args.share) as cgroups:
        capped = all(cg is not None for cg in cgroups)
        results["capped"] = capped
        url = cluster.new_database("scaling")
        parts = urllib.parse.urlsplit(url)
        proxy = DelayProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
        await proxy.start()
        proxy.delay = args.delay / 1000
        gateways: list[Gateway] = []
        try:
            first = new_home("bench-scaling-")
            on_store(first, through(url, proxy.port))
            homes = [first, copy_home(first), copy_home(first)]
            for home, cg in zip(homes, cgroups, strict=True):
                gw = await asyncio.to_thread(start_gateway, home)  # the proxy serves it meanwhile, in this loop
                if cg is not None:
                    cg.hold(gw.proc.pid)
                gateways.append(gw)
            rates: dict[int, list[float]] = {1: [], 2: [], 3: []}
            cpu: dict[int, list[float]] = {1: [], 2: [], 3: []}
            for _ in range(args.rounds):  # interleaved: a slow spell of the machine hits every count alike
                for count in (1, 2, 3):
                    used = gateways[:count]
                    before = [cpu_seconds(gw.proc.pid) for gw in used]
                    started = time.monotonic()
                    rate = await throughput(used, CLIENTS, args.duration)
                    turns = rate * (time.monotonic() - started)
                    spent = sum(cpu_seconds(gw.proc.pid) - b for gw, b in zip(used, before, strict=True))
                    rates[count].append(rate)
                    cpu[count].append(spent / turns * 1e3 if turns else 0.0)
            results["turns_per_s"] = {str(k): median(v) for k, v in rates.items()}
            results["gateway_cpu_ms_per_turn"] = {str(k): median(v) for k, v in cpu.items()}
        finally:
            for gw in gateways:
                await asyncio.to_thread(gw.stop)
            await proxy.stop()
    out = save("bench-scaling", results)
    t, c = results["turns_per_s"], results["gateway_cpu_ms_per_turn"]
    how = f"each gateway held to {args.share:g} of a core" if results["capped"] else "UNCAPPED: no cgroup could be made"
    print(f"gateways sharing one PostgreSQL store at {args.delay:g} ms one-way, {CLIENTS} clients, {how}")
    for k in ("1", "2", "3"):
        print(f"  {k} gateway{'s' if k != '1' else ' '}: {t[k]:7.1f} turns/s, {c[k]:.2f} ms of gateway CPU a turn")
    print(f"  3 vs 1: {t['3'] / t['1']:.2f}x   (target >= 2.5x)")
    print(f"\nwritten to {out}")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=4.0, help="seconds of each throughput window")
    parser.add_argument("--delay", type=float, default=2.0, help="one-way delay to PostgreSQL, ms")
    parser.add_argument("--share", type=float, default=0.25, help="each gateway's share of one core")
    asyncio.run(main(parser.parse_args()))
