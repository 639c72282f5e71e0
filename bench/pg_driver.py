"""asyncpg or psycopg 3 for the PostgreSQL store: the turn path's statements, through each driver, in one run.

One turn is what store/runs.py and store/sessions.py execute for a chat turn, as the PostgreSQL store would:
  1st transaction: the idempotency-key lookup, the INSERT of the run (ON CONFLICT DO NOTHING), the claim of the
                   session's oldest queued run (UPDATE … WHERE seq = (SELECT … FOR UPDATE SKIP LOCKED) RETURNING,
                   with a fencing token), COMMIT;
  (the connection goes back to the pool while the model would run)
  2nd transaction: the finish UPDATE guarded by owner and fencing token RETURNING, the two messages' INSERTs, the
                   session's counter UPDATE, COMMIT.
Each client has a session of its own (no claim waits on another). Sequential (1 client), then 8 and 32 clients
through a pool of POOL_SIZE connections per driver (a gateway's pool). Rounds interleave the drivers (the order
alternates); the figures are the medians over rounds of each round's per-turn p50 and turns/s.

The cluster is tests/postgres.py's throwaway one, with the server's default durability (fsync on) unless --no-fsync.
Needs `make postgres`, the postgres extra (asyncpg) and `pip install 'psycopg[binary,pool]'` (only for this comparison).

    .venv/bin/python bench/pg_driver.py [--rounds 5] [--turns 400] [--no-fsync] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from common import median, pct

import postgres

POOL_SIZE = 8
CLIENTS = (1, 8, 32)

SCHEMA = """
CREATE TABLE sessions (id text PRIMARY KEY, profile text NOT NULL, updated_at double precision NOT NULL,
    message_count integer NOT NULL DEFAULT 0);
CREATE TABLE runs (seq bigserial PRIMARY KEY, id text NOT NULL UNIQUE, idempotency_key text NOT NULL UNIQUE,
    fingerprint text NOT NULL, sender text NOT NULL, profile text NOT NULL, session_id text NOT NULL,
    message text NOT NULL, state text NOT NULL, reply text, owner text, fencing bigint, lease_until double precision,
    attempts integer NOT NULL DEFAULT 0, created_at double precision NOT NULL, updated_at double precision NOT NULL,
    started_at double precision, finished_at double precision);
CREATE INDEX runs_session_state ON runs (session_id, state, seq);
CREATE SEQUENCE fencing_tokens;
CREATE TABLE messages (id bigserial PRIMARY KEY, session_id text NOT NULL REFERENCES sessions (id),
    role text NOT NULL, content text, run_id text, created_at double precision NOT NULL);
"""

# Written with asyncpg's $n, each used once and in order; psycopg's copies have %s in their place.
LOOKUP = "SELECT * FROM runs WHERE idempotency_key = $1"
INSERT_RUN = (
    "INSERT INTO runs (id, idempotency_key, fingerprint, sender, profile, session_id, message, state, created_at,"
    " updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', $8, $9)"
    " ON CONFLICT (idempotency_key) DO NOTHING RETURNING seq"
)
CLAIM = (
    "UPDATE runs SET state = 'running', attempts = attempts + 1, owner = $1, fencing = nextval('fencing_tokens'),"
    " lease_until = $2, started_at = $3, updated_at = $4"
    " WHERE seq = (SELECT seq FROM runs WHERE session_id = $5 AND state = 'queued' ORDER BY seq LIMIT 1"
    " FOR UPDATE SKIP LOCKED)"
    " AND NOT EXISTS (SELECT 1 FROM runs WHERE session_id = $6 AND state = 'running') RETURNING id, fencing"
)
FINISH = (
    "UPDATE runs SET state = 'succeeded', reply = $1, owner = NULL, lease_until = NULL, updated_at = $2,"
    " finished_at = $3 WHERE id = $4 AND state = 'running' AND owner = $5 AND fencing = $6 RETURNING session_id"
)
INSERT_MESSAGE = "INSERT INTO messages (session_id, role, content, run_id, created_at) VALUES ($1, $2, $3, $4, $5)"
TOUCH_SESSION = "UPDATE sessions SET updated_at = $1, message_count = message_count + $2 WHERE id = $3"
OWNER = "gw-bench"
LEASE_SECONDS = 15.0


def psycopg_sql(sql: str) -> str:
    return re.sub(r"\$\d+", "%s", sql)


def turn_params(session: str, key: str) -> dict[str, Any]:
    now = time.time()
    run_id = f"run-{key}"
    return {
        "run_id": run_id,
        "lookup": (key,),
        "insert": (run_id, key, f"fp-{key}", "person", "main", session, f"hello {key}", now, now),
        "claim": (OWNER, now + LEASE_SECONDS, now, now, session, session),
        "messages": [(session, "user", f"hello {key}", run_id, now), (session, "assistant", f"hi {key}", run_id, now)],
    }


class Driver(Protocol):
    name: str

    async def open(self, url: str) -> None: ...
    async def setup(self, sessions: list[str]) -> None: ...
    async def turn(self, session: str, key: str) -> None: ...
    async def close(self) -> None: ...


class Asyncpg:
    """asyncpg's pool; its statements are prepared and cached per connection by asyncpg itself."""

    name = "asyncpg"

    async def open(self, url: str) -> None:
        import asyncpg

        self.pool = await asyncpg.create_pool(url, min_size=POOL_SIZE, max_size=POOL_SIZE)

    async def setup(self, sessions: list[str]) -> None:
        async with self.pool.acquire() as conn:
            await conn.executemany(
                "INSERT INTO sessions (id, profile, updated_at) VALUES ($1, 'main', $2)",
                [(s, time.time()) for s in sessions],
            )

    async def turn(self, session: str, key: str) -> None:
        p = turn_params(session, key)
        async with self.pool.acquire() as conn, conn.transaction():
            known = await conn.fetchrow(LOOKUP, *p["lookup"])
            assert known is None, key
            assert await conn.fetchval(INSERT_RUN, *p["insert"]) is not None
            claimed = await conn.fetchrow(CLAIM, *p["claim"])
            assert claimed is not None and claimed["id"] == p["run_id"], claimed
        now = time.time()
        async with self.pool.acquire() as conn, conn.transaction():
            done = await conn.fetchval(FINISH, f"hi {key}", now, now, p["run_id"], OWNER, claimed["fencing"])
            assert done == session
            await conn.executemany(INSERT_MESSAGE, p["messages"])
            await conn.execute(TOUCH_SESSION, now, 2, session)

    async def close(self) -> None:
        await self.pool.close()


class Psycopg:
    """psycopg 3's AsyncConnectionPool (the C wrapper of psycopg-binary); it prepares a statement on its 5th run
    (prepare_threshold) and pipelines executemany."""

    name = "psycopg"

    async def open(self, url: str) -> None:
        from psycopg_pool import AsyncConnectionPool

        self.pool = AsyncConnectionPool(url, min_size=POOL_SIZE, max_size=POOL_SIZE, open=False)
        await self.pool.open(wait=True)
        self.sql = {name: psycopg_sql(sql) for name, sql in _statements().items()}

    async def setup(self, sessions: list[str]) -> None:
        async with self.pool.connection() as conn, conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO sessions (id, profile, updated_at) VALUES (%s, 'main', %s)",
                [(s, time.time()) for s in sessions],
            )

    async def turn(self, session: str, key: str) -> None:
        p, sql = turn_params(session, key), self.sql
        async with self.pool.connection() as conn, conn.transaction():
            known = await (await conn.execute(sql["LOOKUP"], p["lookup"])).fetchone()
            assert known is None, key
            assert await (await conn.execute(sql["INSERT_RUN"], p["insert"])).fetchone() is not None
            claimed = await (await conn.execute(sql["CLAIM"], p["claim"])).fetchone()
            assert claimed is not None and claimed[0] == p["run_id"], claimed
        now = time.time()
        async with self.pool.connection() as conn, conn.transaction():
            done = await (
                await conn.execute(sql["FINISH"], (f"hi {key}", now, now, p["run_id"], OWNER, claimed[1]))
            ).fetchone()
            assert done is not None and done[0] == session
            async with conn.cursor() as cur:
                await cur.executemany(sql["INSERT_MESSAGE"], p["messages"])
            await conn.execute(sql["TOUCH_SESSION"], (now, 2, session))

    async def close(self) -> None:
        await self.pool.close()


def _statements() -> dict[str, str]:
    return {
        "LOOKUP": LOOKUP,
        "INSERT_RUN": INSERT_RUN,
        "CLAIM": CLAIM,
        "FINISH": FINISH,
        "INSERT_MESSAGE": INSERT_MESSAGE,
        "TOUCH_SESSION": TOUCH_SESSION,
    }


async def scenario(driver: Driver, clients: int, turns: int, tag: str) -> tuple[float, float]:
    """`turns` turns over `clients` concurrent clients (a session each): (per-turn p50 in ms, turns/s)."""
    sessions = [f"{tag}-c{c}" for c in range(clients)]
    await driver.setup(sessions)
    latencies: list[float] = []
    per_client = max(1, turns // clients)

    async def client(session: str) -> None:
        for n in range(per_client):
            started = time.perf_counter()
            await driver.turn(session, f"{session}-{n}")
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(client(s) for s in sessions))
    elapsed = time.perf_counter() - started
    return pct(latencies, 0.5) * 1000, len(latencies) / elapsed


async def bench(url: str, rounds: int, turns: int) -> dict[str, dict[int, dict[str, float]]]:
    import asyncpg
    import psycopg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(SCHEMA)
    finally:
        await conn.close()
    drivers: list[Driver] = [Asyncpg(), Psycopg()]
    for d in drivers:
        await d.open(url)
    samples: dict[tuple[str, int], list[tuple[float, float]]] = {}
    try:
        for d in drivers:  # warm up: connections, prepared statements, the server's caches
            await scenario(d, 8, 80, f"warm-{d.name}")
        for r in range(rounds):
            order = drivers if r % 2 == 0 else drivers[::-1]
            for clients in CLIENTS:
                for d in order:
                    samples.setdefault((d.name, clients), []).append(
                        await scenario(d, clients, turns, f"r{r}-{d.name}-{clients}")
                    )
    finally:
        for d in drivers:
            await d.close()
    print(f"asyncpg {asyncpg.__version__}, psycopg {psycopg.__version__} ({psycopg.pq.__impl__})", file=sys.stderr)
    return {
        name: {
            clients: {
                "p50_ms": median([s[0] for s in samples[(name, clients)]]),
                "turns_per_s": median([s[1] for s in samples[(name, clients)]]),
            }
            for clients in CLIENTS
        }
        for name in ("asyncpg", "psycopg")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=400, help="turns per driver, scenario and round")
    parser.add_argument("--no-fsync", action="store_true", help="the tests' cluster settings (fsync off)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    why = postgres.missing_reason()
    if why is not None:
        sys.exit(f"pg_driver: {why}")
    settings = postgres.TEST_SETTINGS if args.no_fsync else {}
    with postgres.cluster(settings) as cluster:
        figures = asyncio.run(bench(cluster.new_database("bench"), args.rounds, args.turns))
    if args.json:
        print(json.dumps({"python": platform.python_version(), "fsync": not args.no_fsync, "figures": figures}))
        return
    print(f"turn path, {args.rounds} interleaved rounds of {args.turns} turns, pool of {POOL_SIZE}, "
          f"fsync {'off' if args.no_fsync else 'on'} (medians over rounds)")  # fmt: skip
    heads = [f"{c} client{'s' if c > 1 else ''}" for c in CLIENTS]
    print(f"{'driver':<10}" + "".join(f"{h:>26}" for h in heads))
    for name, by_clients in figures.items():
        cells = [f"p50 {v['p50_ms']:.2f} ms, {v['turns_per_s']:.0f}/s" for v in by_clients.values()]
        print(f"{name:<10}" + "".join(f"{c:>26}" for c in cells))


if __name__ == "__main__":
    main()
