"""`make bench` (PostgreSQL notices): how soon a sender waiting on one gateway hears of the end of a turn that
another gateway of the same store ran.

Two gateways on one PostgreSQL store (tests/postgres.py's throwaway cluster), in one process: `a` runs no turns,
`b` runs them. A person's message is delivered through `a` and waited on there; `b` claims it, answers it (echo)
and commits its end. Measured for each turn: from the end's time as `b` wrote it (just before its commit) until
`a`'s wait returned with it: the commit, `b`'s notice sent after it, the server's delivery of that notice to `a`,
and `a`'s read of the run. Printed: the median and p90 over `--n` turns, each a new text.

    .venv/bin/python bench/heard.py [--n 40] [--json]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from common import median, new_home, pct
from run import save
from shared import SERVER_SETTINGS, copy_home, on_store

import postgres
from backchannel.core.delivery.admission import Attempt
from backchannel.core.gateway import Gateway


async def heard(home_a: Path, home_b: Path, n: int) -> list[float]:
    a, b = Gateway(home_a, runs_turns=False), Gateway(home_b)
    await a.start()
    await b.start()
    try:
        chat = await a.directory.open_bot_chat("default")
        waits: list[float] = []
        for i in range(n):
            sent = Attempt.handed_in(chat, f"heard {i} {time.time_ns()}", "human:api")
            done = await a.delivery.deliver(sent, wait=30)
            returned = time.time()
            if done.run.finished_at is None:
                raise RuntimeError(f"run {done.run.id} not ended within its wait: {done.run.state.value}")
            waits.append(returned - done.run.finished_at)
        return waits
    finally:
        await b.stop(grace=1)
        await a.stop(grace=1)


async def main(args: argparse.Namespace) -> None:
    why = postgres.missing_reason()
    if why is not None:
        raise SystemExit(f"bench/heard.py: {why}")
    results: dict[str, Any] = {"machine": platform.platform(), "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    with postgres.cluster(SERVER_SETTINGS) as cluster:
        home = new_home("bench-heard-")
        on_store(home, cluster.new_database("heard"))
        waits = await heard(home, copy_home(home), args.n)
    results["heard"] = {"p50_ms": median(waits) * 1e3, "p90_ms": pct(waits, 0.9) * 1e3, "n": len(waits)}
    out = save("bench-heard", results)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    h = results["heard"]
    what = "an end on another gateway heard by its waiter"
    print(f"{'measure':<52} {'figures':<28} target")
    print(f"{what:<52} p50 {h['p50_ms']:.1f} ms, p90 {h['p90_ms']:.1f} ms{'':<4} <= 10 ms")
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    asyncio.run(main(parser.parse_args()))
