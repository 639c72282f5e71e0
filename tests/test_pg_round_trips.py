"""What a turn's writes cost in round trips to a PostgreSQL store, counted on the wire: the store reaches the tests'
throwaway cluster through tests/delay_proxy.py, which counts the client's bursts (each a round trip it waited for).

A message recorded is one round trip however it lands (started and claimed, queued, steered into the running turn,
held, with files, a replay of its key, a keyless retry); a run's end is one too. The store has one pooled
connection here, so every statement it sends goes on the connection it prepared it on (a first use of a statement
costs a round trip more, to prepare it: each is used once before it is counted), and the announcements a write made
are sent (a round trip of their own, after the commit) before the next write is counted.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from backchannel.errors import Conflict, LimitReached
from backchannel.messages import Attachment, Message
from backchannel.store import runs, sessions
from backchannel.store.pg import PgDatabase
from backchannel.store.runs import NewRun, RunState
from delay_proxy import DelayProxy

OWNER = "gateway-1"


def through(url: str, port: int) -> str:
    parts = urllib.parse.urlsplit(url)
    auth = parts.netloc.rsplit("@", 1)[0]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{auth}@127.0.0.1:{port}"))


def test_a_message_recorded_and_a_run_finished_are_one_round_trip_each(postgres_url: str) -> None:
    async def scenario() -> None:
        parts = urllib.parse.urlsplit(postgres_url)
        proxy = DelayProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
        await proxy.start()
        db = PgDatabase(through(postgres_url, proxy.port), pool_size=1)
        try:
            await db.open()

            async def trips(act: Callable[[], Awaitable[Any]]) -> tuple[int, Any]:
                await db.notices_sent()
                before = proxy.round_trips
                done = await act()
                return proxy.round_trips - before, done

            def record(sid: str, text: str, key: str | None, **options: Any) -> Callable[[], Awaitable[Any]]:
                fields = {f: options.pop(f) for f in ("steer", "held", "files", "retry_window") if f in options}
                new = NewRun("human:api", "main", sid, text, idempotency_key=key, **fields)
                return lambda: runs.record(db, new, claim_for=OWNER, max_queued=5, **options)

            warm = (await sessions.create_session(db, "main")).id  # each statement prepared once
            first, _ = await record(warm, "warm", "w-1")()
            said = [Message(role="assistant", content="done")]
            await runs.finish(db, first, owner=OWNER, state=RunState.COMPLETED, messages=said)

            sid = (await sessions.create_session(db, "main")).id
            counted: dict[str, int] = {}
            counted["started"], (turn, created) = await trips(record(sid, "one", "k-1"))
            assert created and turn.state is RunState.RUNNING and turn.landed == "started"
            counted["queued"], (queued, _) = await trips(record(sid, "two", "k-2"))
            assert queued.state is RunState.QUEUED and queued.landed == "queued"
            counted["steered"], (steered, _) = await trips(record(sid, "three", "k-3", steer=True))
            assert steered.landed == "steered"
            counted["held"], (held, _) = await trips(record(sid, "four", "k-4", held=True))
            assert held.state is RunState.HELD
            counted["files"], _ = await trips(
                record(sid, "five", "k-5", files=(Attachment("a.txt", "text/plain", b"a"),))
            )
            counted["keyless retry"], _ = await trips(record(sid, "six", None, retry_window=60.0))
            counted["replay"], (again, created) = await trips(record(sid, "one", "k-1"))
            assert (again.id, created) == (turn.id, False)
            counted["conflict"], conflict = await trips(lambda: _raised(record(sid, "other", "k-1")))
            assert isinstance(conflict, Conflict)
            counted["finish"], _ = await trips(
                lambda: runs.finish(db, turn, owner=OWNER, state=RunState.COMPLETED, messages=said)
            )
            assert counted == dict.fromkeys(counted, 1)
        finally:
            await db.aclose()
            await proxy.stop()

    asyncio.run(scenario())


async def _raised(act: Callable[[], Awaitable[Any]]) -> BaseException:
    with pytest.raises((Conflict, LimitReached)) as caught:
        await act()
    return caught.value
