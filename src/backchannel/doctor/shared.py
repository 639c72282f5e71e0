"""Doctor's check of a shared store: the PostgreSQL database the home's gateways share (`store.url`).

It opens the store as a gateway would (applying the migrations it lacks, as opening state.db does), reads how many
runs it keeps and whose it is (the gateway id kept in it), and lets it go."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from ..errors import BackchannelError
from ..home.config import GatewayConfig
from ..store import backend, meta
from .report import Check, fail, ok, warn

TIMEOUT_SECONDS = 10.0


async def store(root: Path, settings: GatewayConfig) -> Check:
    """The shared store answers, has a schema this Backchannel knows, and is this home's gateway's."""
    try:
        db = backend.open_store(root, settings)
    except BackchannelError as exc:
        return fail("store", exc.message, "correct store.url in config.yaml (or BACKCHANNEL_STORE_URL)")
    try:
        async with asyncio.timeout(TIMEOUT_SECONDS):
            await db.open()
            try:
                owner = await meta.meta_get(db, meta.GATEWAY_ID)
                counted = await db.one("SELECT COUNT(*) FROM runs")
                now = time.time()
                leases = await db.one(
                    "SELECT COUNT(*) FILTER (WHERE lease_until >= ?), COUNT(*) FILTER (WHERE lease_until < ?)"
                    " FROM runs WHERE state = 'running'",
                    (now, now),
                )
            finally:
                await db.aclose()
    except TimeoutError:
        return fail(
            "store", f"{db.name!r} did not answer within {TIMEOUT_SECONDS:g}s", "is the server up and reachable?"
        )
    except BackchannelError as exc:
        fix = "check the server, the URL, and BACKCHANNEL_STORE_PASSWORD in .env"
        return fail("store", exc.message, fix)
    runs = int(counted[0]) if counted is not None else 0
    if owner is not None and owner != settings.gateway_id:
        return fail(
            "store",
            f"{db.name!r} belongs to gateway {owner}, not this home's {settings.gateway_id}",
            f"give this home `gateway: {{id: {owner}}}` (gateways on one store are one gateway), or another store",
        )
    whose = f"gateway {owner}" if owner else "no gateway has started on it yet"
    held, lapsed = (int(leases[0]), int(leases[1])) if leases is not None else (0, 0)
    detail = (
        f"{db.name!r} (PostgreSQL) answers: {_some(runs, 'run')}, {_some(held, 'turn')} running under a live"
        f" lease; {whose}"
    )
    if lapsed:
        return warn(
            "store",
            f"{detail}; {_some(lapsed, 'turn')} left running by a gateway whose lease ran out",
            "start a gateway on this store: it takes them over and runs them again",
        )
    return ok("store", detail)


def _some(n: int, word: str) -> str:
    """`1 run`, `2 runs`."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
