"""The runtime and router: durable runs, one turn at a time per session, idempotency, stop, expiry, recovery."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from backchannel.agent.engines.base import ModelRequest, OnDelta
from backchannel.core.directory import Router
from backchannel.core.queue import Runtime
from backchannel.errors import Conflict, StoreError
from backchannel.home import config
from backchannel.messages import Message
from backchannel.store.db import Database
from backchannel.store.runs import RunState


class RecordingEngine:
    """A fake model: answers `ok: <text>` after `delay`, recording overlap between turns."""

    name = "fake"
    uses_context = True

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.active = 0
        self.max_active_per_session: dict[str, int] = {}
        self.seen: list[str] = []

    async def step(self, request: ModelRequest, on_delta: OnDelta | None = None) -> Message:
        text = request.messages[-1].content
        self.active += 1
        self.seen.append(text)
        try:
            if on_delta:
                on_delta("partial ")
            await asyncio.sleep(self.delay)
        finally:
            self.active -= 1
        return Message(role="assistant", content=f"ok: {text}")

    async def aclose(self) -> None:
        return None


def with_runtime(
    root: Path, body: Callable[[Router, Any], Awaitable[None]], *, engine: Any = None, **kwargs: Any
) -> None:
    async def main() -> None:
        factory = (lambda profile, secret: engine) if engine is not None else None
        runtime = Runtime(root, **({"engine_factory": factory} if factory else {}), **kwargs)
        await runtime.start()
        try:
            await body(Router(runtime), runtime)
        finally:
            await runtime.close(grace=1)

    asyncio.run(main())


def test_runs_of_one_session_are_fifo_and_never_overlap(initialised: Path) -> None:
    engine = RecordingEngine(delay=0.005)
    overlaps: list[int] = []

    async def body(router: Router, runtime: Runtime) -> None:
        session, _ = router.create_session("default")
        other, _ = router.create_session("default")
        runs = [router.submit(session, f"m{i}", sender="human:api").run for i in range(30)]
        side = [router.submit(other, f"o{i}", sender="human:api").run for i in range(5)]

        async def watch() -> None:
            while True:
                rows = runtime.db.all(
                    "SELECT COUNT(*) FROM runs WHERE session_id = ? AND state = 'running'", (session.id,)
                )
                overlaps.append(rows[0][0])
                await asyncio.sleep(0.001)

        watcher = asyncio.create_task(watch())
        done = [await router.wait(r.id, 10) for r in [*runs, *side]]
        watcher.cancel()
        assert all(r.state is RunState.COMPLETED for r in done)
        texts = [m.content for m in router.messages(session.id)]
        expected = [x for i in range(30) for x in (f"m{i}", f"ok: m{i}")]
        assert texts == expected

    with_runtime(initialised, body, engine=engine)
    assert max(overlaps) <= 1


def test_same_key_returns_the_first_run_and_never_runs_twice(initialised: Path) -> None:
    engine = RecordingEngine()

    async def body(router: Router, runtime: Runtime) -> None:
        session, _ = router.create_session("default")
        first = await router.deliver(session, "hello", sender="human:api", wait=5, idempotency_key="k1")
        again = await router.deliver(session, "hello", sender="human:api", wait=5, idempotency_key="k1")
        assert again.replayed and again.run.id == first.run.id and again.run.reply == "ok: hello"
        with pytest.raises(Conflict):
            router.submit(session, "something else", sender="human:api", idempotency_key="k1")
        derived = await router.deliver(session, "same words", sender="human:api", wait=5)
        repeat = await router.deliver(session, "same words", sender="human:api", wait=5)
        assert repeat.run.id == derived.run.id and repeat.replayed
        other_sender = await router.deliver(session, "same words", sender="human:cli", wait=5)
        assert other_sender.run.id != derived.run.id

    with_runtime(initialised, body, engine=engine)
    assert engine.seen == ["hello", "same words", "same words"]


def test_idempotency_survives_a_new_runtime(initialised: Path) -> None:
    ids: list[str] = []

    async def send(router: Router, runtime: Runtime) -> None:
        session = router.bot_chat("default")
        d = await router.deliver(session, "once", sender="human:api", wait=5, idempotency_key="durable")
        ids.append(d.run.id)

    with_runtime(initialised, send)
    with_runtime(initialised, send)
    assert ids[0] == ids[1]
    db = Database(config.db_path(initialised))
    assert db.one("SELECT COUNT(*) FROM runs")[0] == 1
    assert db.one("SELECT COUNT(*) FROM messages WHERE role = 'assistant'")[0] == 1


def test_wait_returns_a_receipt_then_the_run_finishes(initialised: Path) -> None:
    async def body(router: Router, runtime: Runtime) -> None:
        session, _ = router.create_session("default")
        slow = await router.deliver(session, "/sleep 0.3\nslow", sender="human:api", wait=0.05)
        behind = await router.deliver(session, "behind", sender="human:api", wait=0.01)
        assert slow.run.state is RunState.RUNNING
        assert behind.run.state is RunState.QUEUED and behind.queue_position == 1
        assert (await router.wait(behind.run.id, 5)).reply == "default (echo): behind"

    with_runtime(initialised, body)


def test_stop_interrupts_a_running_turn_at_once_keeping_partial_output(initialised: Path) -> None:
    engine = RecordingEngine(delay=30)

    async def body(router: Router, runtime: Runtime) -> None:
        session, _ = router.create_session("default")
        running = router.submit(session, "long job", sender="human:api").run
        queued = router.submit(session, "never", sender="human:api").run
        while router.run(running.id).state is not RunState.RUNNING:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.02)
        cancelled = await router.stop(queued.id)
        assert cancelled.state is RunState.CANCELLED
        started = time.monotonic()
        stopped = await router.stop(running.id)
        assert time.monotonic() - started < 1
        assert stopped.state is RunState.CANCELLED and stopped.reply == "partial "
        assert (await router.stop(queued.id)).state is RunState.CANCELLED  # stopping twice is harmless

    with_runtime(initialised, body, engine=engine)
    assert engine.seen == ["long job"]


def test_a_queued_run_past_its_ttl_expires_with_a_clear_error(initialised: Path) -> None:
    cfg = config.load_yaml(config.config_path(initialised))
    cfg["gateway"]["run_ttl_seconds"] = 1
    config.write_yaml(config.config_path(initialised), cfg)

    async def body(router: Router, runtime: Runtime) -> None:
        session, _ = router.create_session("default")
        router.submit(session, "/sleep 1.2\nblocker", sender="human:api")
        late = router.submit(session, "late", sender="human:api").run
        done = await router.wait(late.id, 5)
        assert done.state is RunState.EXPIRED
        assert "expired" in (done.error or "")

    with_runtime(initialised, body)


def test_runs_left_running_by_a_dead_process_are_requeued_and_finish_once(initialised: Path) -> None:
    async def record(router: Router, runtime: Runtime) -> None:
        session = router.bot_chat("default")
        router.submit(session, "interrupted work", sender="human:api", idempotency_key="crash")

    # Record a run, then pretend a process that has since died claimed it.
    with_runtime(initialised, record, scope=set())
    db = Database(config.db_path(initialised))
    with db.tx() as conn:
        conn.execute(
            "UPDATE runs SET state = 'running', owner = '999999999:dead', attempts = 1, lease_until = ?",
            (time.time() + 60,),
        )
    db.close()

    async def recover(router: Router, runtime: Runtime) -> None:
        run = router.run(runtime.db.one("SELECT id FROM runs")[0])
        done = await router.wait(run.id, 5)
        assert done.state is RunState.COMPLETED and done.attempts == 2
        assert [m.content for m in router.messages(done.session_id)] == [
            "interrupted work",
            "default (echo): interrupted work",
        ]

    with_runtime(initialised, recover)


def test_runs_interrupted_too_often_fail(initialised: Path) -> None:
    async def record(router: Router, runtime: Runtime) -> None:
        router.submit(router.bot_chat("default"), "poison", sender="human:api")

    with_runtime(initialised, record, scope=set())
    db = Database(config.db_path(initialised))
    with db.tx() as conn:
        conn.execute("UPDATE runs SET state = 'running', owner = '999999999:dead', attempts = 3")
    db.close()

    async def check(router: Router, runtime: Runtime) -> None:
        run = router.run(runtime.db.one("SELECT id FROM runs")[0])
        assert run.state is RunState.FAILED and run.error_code == "interrupted"

    with_runtime(initialised, check)


def test_a_run_recorded_by_another_process_is_picked_up(initialised: Path) -> None:
    async def body(router: Router, runtime: Runtime) -> None:
        session, _ = router.create_session("default")
        await router.db.durable()  # another process waits for our commit; in one thread we must not hold it
        # Another process (a CLI beside the gateway) records a run straight into the store.
        other = Runtime(initialised, scope=set())
        run, _ = other.submit(profile="default", session_id=session.id, message="from elsewhere", sender="human:cli")
        other.db.close()
        done = await router.wait(run.id, 5)
        assert done.reply == "default (echo): from elsewhere"

    with_runtime(initialised, body, poll_seconds=0.02)


def test_memory_tool_adds_replaces_removes_within_limits(initialised: Path) -> None:
    def call(args: dict[str, Any]) -> str:
        return f"/tool memory {json.dumps(args)}"

    async def body(router: Router, runtime: Runtime) -> None:
        session, _ = router.create_session("default")

        async def tool(args: dict[str, Any]) -> dict[str, Any]:
            d = await router.deliver(
                session, call(args), sender="human:api", idempotency_key=str(time.time_ns()), wait=5
            )
            tool_msg = [m for m in router.messages(session.id) if m.role == "tool"][-1]
            assert d.run.state is RunState.COMPLETED
            result: dict[str, Any] = json.loads(tool_msg.content)
            return result

        assert (await tool({"action": "add", "target": "user", "content": "likes tea"}))["ok"]
        assert (await tool({"action": "replace", "target": "user", "content": "likes coffee", "old_text": "tea"}))["ok"]
        assert (await tool({"action": "remove", "target": "user", "content": "nothing"}))["error"][
            "code"
        ] == "not_found"
        big = {"action": "add", "target": "memory", "content": "x" * 501}
        assert (await tool(big))["error"]["code"] == "invalid_arguments"
        for i in range(10):
            await tool({"action": "add", "target": "user", "content": f"{i} " + "y" * 400})
        full = await tool({"action": "add", "target": "user", "content": "one more " + "z" * 400})
        assert full["error"]["code"] == "memory_full"

    with_runtime(initialised, body)
    user = (initialised / "profiles/default/memories/USER.md").read_text()
    assert "likes coffee" in user and "likes tea" not in user
    assert len(user) <= 2000


def test_a_database_from_a_newer_backchannel_is_refused(initialised: Path) -> None:
    db = Database(config.db_path(initialised))
    with db.tx() as conn:
        conn.execute("INSERT INTO schema_migrations (name, applied_at) VALUES ('9999_future', 0)")
    db.close()
    with pytest.raises(StoreError, match="newer Backchannel"):
        Database(config.db_path(initialised))


def test_migrations_are_recorded_once(initialised: Path) -> None:
    Database(config.db_path(initialised)).close()
    Database(config.db_path(initialised)).close()
    conn = sqlite3.connect(config.db_path(initialised))
    names = [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]
    assert names == ["0001_sessions_messages", "0002_runs", "0003_messaging", "0004_outbound", "0005_lean_run_indexes"]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_stop_right_after_submit_cancels_before_the_turn_begins(initialised: Path) -> None:
    engine = RecordingEngine()

    async def body(router: Router, runtime: Runtime) -> None:
        session, _ = router.create_session("default")
        run = router.submit(session, "never mind", sender="human:api").run
        assert run.state is RunState.RUNNING  # claimed at once: the session was idle
        stopped = await router.stop(run.id)  # before its worker had a chance to run it
        assert stopped.state is RunState.CANCELLED
        after = router.submit(session, "next one", sender="human:api").run
        assert (await router.wait(after.id, 5)).reply == "ok: next one"

    with_runtime(initialised, body, engine=engine)
    assert engine.seen == ["next one"]
