"""`make bench`: costs as the store grows. The same measures on an empty store and on one holding RUNS runs
(1,000,000 by default), in one run: the gateway's start and its memory, a turn (interleaved rounds), and the
ledger's reads as the CLI, the API and the web view make them (the first page, a pair, the last hour, a
profile's, one exchange), each timed in process on the store itself.

    python bench/growth.py [--runs 1000000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Gateway, backchannel, median, new_home, start_gateway
from run import TableRow, chat_request, new_session, print_rows, save, sequential

from backchannel.store import ledger
from backchannel.store.db import Database

DAYS = 60  # the runs spread over this many days before now
SESSIONS = 200
BATCH = 50_000


def fill(home: Path, runs: int) -> None:
    """`runs` ended runs written straight into the home's store (a person asking default or research, and the
    two asking each other, in exchanges of four), over the last DAYS days: what a year of use leaves."""
    now = time.time()
    rng = random.Random(7)
    with sqlite3.connect(home / "state.db") as db:
        sessions = [(f"20260101_000000_{i:06x}", "default" if i % 2 else "research") for i in range(SESSIONS)]
        db.executemany(
            "INSERT INTO sessions (id, profile, title, source, created_at, updated_at, message_count)"
            " VALUES (?, ?, ?, 'api', ?, ?, 0)",
            [(sid, profile, f"grown {sid}", now - DAYS * 86_400, now) for sid, profile in sessions],
        )
        written = 0
        while written < runs:
            rows = []
            for n in range(written, min(runs, written + BATCH)):
                sid, profile = sessions[n % SESSIONS]
                at = now - DAYS * 86_400 * (1 - n / runs) - 3600  # oldest first, the newest an hour ago
                run_id = f"run_{uuid.UUID(int=rng.getrandbits(128)).hex}"
                origin = f"run_{n - n % 4:032x}"
                sender = "human:cli" if n % 4 == 0 else f"{'research' if profile == 'default' else 'default'}/{sid}"
                rows.append(
                    (
                        run_id,
                        f"cli-{run_id}",
                        run_id[4:28],
                        sender,
                        profile,
                        sid,
                        f"question number {n} about the build",
                        n % 4,
                        "completed" if n % 97 else "failed",
                        f"{profile} (echo): question number {n} about the build",
                        1,
                        at,
                        at + 1,
                        at,
                        at + 1,
                        origin,
                        1,
                        "started",
                        12,
                        30,
                    )
                )
            db.executemany(
                "INSERT INTO runs (id, idempotency_key, fingerprint, sender, profile, session_id, message, hops, state,"
                " reply, attempts, created_at, updated_at, started_at, finished_at, origin, fencing, landed,"
                " tokens_in, tokens_out) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            written += len(rows)
        db.execute("ANALYZE")


def started(home: Path, rounds: int) -> tuple[Gateway, float, list[float]]:
    """The gateway on `home`, started `rounds` times: (the last one, running; its RSS in KiB; the start times)."""
    times = []
    for i in range(rounds):
        t = time.perf_counter()
        gw = start_gateway(home)
        times.append(time.perf_counter() - t)
        if i < rounds - 1:
            gw.stop()
    return gw, gw.rss_kib(), times


async def reads(home: Path, rounds: int) -> dict[str, float]:
    """Each ledger read, its median time in ms over `rounds`, on the store itself (what the CLI, the API and the
    web view call)."""
    db = Database(home / "state.db")
    await db.open()
    try:
        since = time.time() - 3 * 3600
        newest = await ledger.entries(db, limit=1)
        origin = (newest[0].origin if newest else None) or "none"
        cases: dict[str, Any] = {
            "first_page": lambda: ledger.entries(db, limit=50),
            "pair": lambda: ledger.entries(db, "default", "research", limit=50),
            "last_hours": lambda: ledger.entries(db, limit=50, since=since),
            "profile": lambda: ledger.entries(db, limit=50, profile="research"),
            "exchange": lambda: ledger.exchange(db, origin),
        }
        out = {}
        for name, read in cases.items():
            times = []
            for _ in range(rounds):
                t = time.perf_counter()
                await read()
                times.append(time.perf_counter() - t)
            out[name] = median(times) * 1e3
        return out
    finally:
        await db.aclose()


async def turns(gws: dict[str, Gateway], rounds: int, n: int) -> dict[str, float]:
    async with aiohttp.ClientSession() as s:
        sids = {name: await new_session(s, gw, "growth") for name, gw in gws.items()}
        counter = [0]
        times: dict[str, list[float]] = {name: [] for name in gws}
        for _ in range(rounds):
            for name, gw in gws.items():
                for _ in range(n):
                    m, u, kw = chat_request(gw, sids[name], counter)
                    times[name] += await sequential(s, m, u, 1, **kw)
    return {name: median(t) * 1e3 for name, t in times.items()}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    homes = {"empty": new_home("growth-empty-"), "grown": new_home("growth-grown-")}
    for home in homes.values():
        backchannel(home, "profile", "create", "research")
        store = Database(home / "state.db")
        await store.open()  # the schema, as a gateway's first start writes it
        await store.aclose()
    t = time.perf_counter()
    fill(homes["grown"], args.runs)
    filled = time.perf_counter() - t
    results: dict[str, Any] = {"runs": args.runs, "fill_seconds": filled}
    gws: dict[str, Gateway] = {}
    try:
        for name, home in homes.items():
            gw, rss, start_times = started(home, 3)
            gws[name] = gw
            results[name] = {"start_s": median(start_times), "rss_kib": rss}
        results["turn_p50_ms"] = await turns(gws, args.rounds, args.n)
        for name, gw in gws.items():
            results[name]["rss_after_turns_kib"] = gw.rss_kib()
        for name, home in homes.items():
            results[name]["reads_ms"] = await reads(home, args.rounds)
    finally:
        for gw in gws.values():
            gw.stop()
    return results


def table(r: dict[str, Any]) -> None:
    e, g = r["empty"], r["grown"]
    runs = f"{r['runs']:,}"
    rows: list[TableRow] = [
        (
            f"turn p50, {runs} runs vs empty",
            f"{r['turn_p50_ms']['grown']:.2f} vs {r['turn_p50_ms']['empty']:.2f} ms",
            f"{r['turn_p50_ms']['grown'] / r['turn_p50_ms']['empty']:.2f}x",
            "<= 1.2x",
            r["turn_p50_ms"]["grown"] / r["turn_p50_ms"]["empty"] <= 1.2,
        ),
        (
            f"gateway start, {runs} runs vs empty",
            f"{g['start_s']:.2f} vs {e['start_s']:.2f} s",
            f"{g['start_s'] / e['start_s']:.2f}x",
            "<= 2 s",
            g["start_s"] <= 2,
        ),
        (
            f"gateway RSS after turns, {runs} runs vs empty",
            f"{g['rss_after_turns_kib'] / 1024:.0f} vs {e['rss_after_turns_kib'] / 1024:.0f} MiB",
            f"{g['rss_after_turns_kib'] / e['rss_after_turns_kib']:.2f}x",
            "flat (<= 1.2x)",
            g["rss_after_turns_kib"] / e["rss_after_turns_kib"] <= 1.2,
        ),
    ]
    for name, ms in g["reads_ms"].items():
        rows.append(
            (
                f"ledger {name.replace('_', ' ')}, {runs} runs vs empty",
                f"{ms:.1f} vs {e['reads_ms'][name]:.1f} ms",
                "",
                "<= 50 ms",
                ms <= 50,
            )
        )
    print_rows(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1_000_000, help="runs in the grown store")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=40, help="turns per gateway per round")
    results = asyncio.run(main(parser.parse_args()))
    out = save("growth", results)
    table(results)
    print(f"\nwritten to {out}")
