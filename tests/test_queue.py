"""The run queue and its workers, through the gateway's delivery service: durable runs, one turn at a time per
session, idempotency, stop, expiry, recovery."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from backchannel.agent.engines.base import ModelRequest, OnDelta
from backchannel.core.delivery.admission import Attempt
from backchannel.core.delivery.delivery import Delivered
from backchannel.core.gateway import Gateway
from backchannel.errors import Conflict, GatewayDraining, StoreError
from backchannel.home import config
from backchannel.messages import Message
from backchannel.records import Run, Session
from backchannel.store.db import Database
from backchannel.store.migrations import MIGRATIONS
from backchannel.store.runs import NewRun, RunState
from conftest import use_shared_store
from conftest import with_gateway as run_with_gateway


class RecordingEngine:
    """A fake model: answers `ok: <text>` after `delay`, measuring how many turns of one session overlap.

    A session is told apart by the first character of its messages (the tests give each its own)."""

    name = "fake"
    uses_context = True
    keeps_session = False
    offers_tools = True

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.active: dict[str, int] = {}
        self.max_active_per_session: dict[str, int] = {}
        self.seen: list[str] = []

    async def step(self, request: ModelRequest, on_delta: OnDelta | None = None) -> Message:
        text = request.messages[-1].content
        session = text[:1]
        self.active[session] = self.active.get(session, 0) + 1
        self.max_active_per_session[session] = max(self.max_active_per_session.get(session, 0), self.active[session])
        self.seen.append(text)
        try:
            if on_delta:
                on_delta("partial ")
            await asyncio.sleep(self.delay)
        finally:
            self.active[session] -= 1
        return Message(role="assistant", content=f"ok: {text}")

    async def aclose(self) -> None:
        return None


def with_gateway(root: Path, body: Callable[[Gateway], Awaitable[None]], *, engine: Any = None, **kwargs: Any) -> None:
    if engine is not None:
        kwargs["engine_factory"] = lambda profile, secret: engine
    run_with_gateway(root, body, **kwargs)


def person(session: Session, text: str, key: str | None = None) -> Attempt:
    return Attempt.handed_in(session, text, "human:api", key=key)


async def new_session(gw: Gateway) -> Session:
    session, created = await gw.directory.create_session("default")
    assert created
    return session


async def queued(gw: Gateway, session: Session, text: str, key: str | None = None) -> Any:
    """Put a run in the queue at once (no wait for its commit), as the delivery service does."""
    return (
        await gw.queue.submit(
            NewRun(
                sender="human:api", profile=session.profile, session_id=session.id, message=text, idempotency_key=key
            )
        )
    )[0]


async def deliver(gw: Gateway, session: Session, text: str, *, wait: float, key: str | None = None) -> Delivered:
    return await gw.delivery.deliver(person(session, text, key), wait=wait)


def test_runs_of_one_session_are_fifo_and_never_overlap(initialised: Path) -> None:
    engine = RecordingEngine(delay=0.005)

    async def body(gw: Gateway) -> None:
        session = await new_session(gw)
        other = await new_session(gw)
        runs = [await queued(gw, session, f"m{i}") for i in range(30)]
        side = [await queued(gw, other, f"o{i}") for i in range(5)]
        done = [await gw.delivery.wait(r.id, 10) for r in [*runs, *side]]
        assert all(d.run.state is RunState.COMPLETED for d in done)
        texts = [m.content for m in await gw.directory.messages(session.id)]
        assert texts == [x for i in range(30) for x in (f"m{i}", f"ok: m{i}")]

    with_gateway(initialised, body, engine=engine)
    assert engine.max_active_per_session == {"m": 1, "o": 1}  # one turn at a time in each session
    overlapped = [t for t in engine.seen if t.startswith("o")]
    assert overlapped, "the other session ran too"


def test_same_key_returns_the_first_run_and_never_runs_twice(initialised: Path) -> None:
    engine = RecordingEngine()

    async def body(gw: Gateway) -> None:
        session = await new_session(gw)
        first = await deliver(gw, session, "hello", wait=5, key="k1")
        again = await deliver(gw, session, "hello", wait=5, key="k1")
        assert again.result.replayed and again.run.id == first.run.id and again.run.reply == "ok: hello"
        with pytest.raises(Conflict):
            await gw.delivery.submit(person(session, "something else", key="k1"))
        derived = await deliver(gw, session, "same words", wait=5)
        retry = await gw.delivery.deliver(replace(person(session, "same words"), retry_window=60), wait=5)
        assert retry.run.id == derived.run.id and retry.result.replayed
        other_sender = Attempt.handed_in(session, "same words", "human:cli", retry_window=60)
        assert (await gw.delivery.deliver(other_sender, wait=5)).run.id != derived.run.id

    with_gateway(initialised, body, engine=engine)
    assert engine.seen == ["hello", "same words", "same words"]


class Clock:
    """A clock that stands still until the test moves it."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def move(self, seconds: float) -> None:
        self.now += seconds


def test_a_keyless_send_is_a_new_message_and_only_a_retry_is_answered_within_its_window(initialised: Path) -> None:
    """Two keyless sends of the same words are two runs (a person asking twice gets two answers); a client's
    automatic retry (`retry_window`) is its first run within the window, whatever the clock says; past it, new."""
    engine = RecordingEngine()
    clock = Clock(int(time.time()) + 0.9)  # just before a whole second: a fixed bucket of 1 s would split the two

    async def body(gw: Gateway) -> None:
        session = await new_session(gw)
        first = await deliver(gw, session, "status?", wait=5)
        clock.move(0.2)
        asked_again = await deliver(gw, session, "status?", wait=5)
        assert asked_again.run.id != first.run.id and not asked_again.result.replayed
        retried = await gw.delivery.deliver(replace(person(session, "status?"), retry_window=1), wait=5)
        assert retried.run.id == asked_again.run.id and retried.result.replayed
        clock.move(1.1)
        later = await gw.delivery.deliver(replace(person(session, "status?"), retry_window=1), wait=5)
        assert later.run.id not in (first.run.id, asked_again.run.id) and not later.result.replayed

    with_gateway(initialised, body, engine=engine, clock=clock)
    assert engine.seen == ["status?", "status?", "status?"]


def test_idempotency_survives_a_new_gateway(initialised: Path) -> None:
    ids: list[str] = []

    async def send(gw: Gateway) -> None:
        session = await gw.directory.open_bot_chat("default")
        d = await deliver(gw, session, "once", wait=5, key="durable")
        ids.append(d.run.id)

    with_gateway(initialised, send)
    with_gateway(initialised, send)
    assert ids[0] == ids[1]

    async def check(gw: Gateway) -> None:
        session = await gw.directory.open_bot_chat("default")
        assert [m.content for m in await gw.directory.messages(session.id)] == ["once", "default (echo): once"]

    with_gateway(initialised, check)


def test_wait_returns_a_receipt_then_the_run_finishes(initialised: Path) -> None:
    async def body(gw: Gateway) -> None:
        session = await new_session(gw)
        slow = await deliver(gw, session, "/sleep 0.3\nslow", wait=0.05)
        behind = await deliver(gw, session, "behind", wait=0.01)
        assert slow.run.state is RunState.RUNNING and slow.result.outcome == "receipt"
        assert behind.run.state is RunState.QUEUED and behind.result.queue_position == 1
        assert (await gw.delivery.wait(behind.run.id, 5)).run.reply == "default (echo): behind"

    with_gateway(initialised, body)


def test_stop_interrupts_a_running_turn_at_once_keeping_partial_output(initialised: Path) -> None:
    engine = RecordingEngine(delay=30)

    async def body(gw: Gateway) -> None:
        session = await new_session(gw)
        running = await queued(gw, session, "long job")
        waiting = await queued(gw, session, "never")
        while (await gw.delivery.run(running.id)).state is not RunState.RUNNING:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.02)
        cancelled = await gw.delivery.stop(waiting.id)
        assert cancelled.run.state is RunState.CANCELLED and cancelled.result.outcome == "failed"
        stopped = await gw.delivery.stop(running.id)  # its partial reply: cut, not waited out (30 s)
        assert stopped.run.state is RunState.CANCELLED and stopped.run.reply == "partial "
        assert (await gw.delivery.stop(waiting.id)).run.state is RunState.CANCELLED  # stopping twice is harmless

    with_gateway(initialised, body, engine=engine)
    assert engine.seen == ["long job"]


def test_a_queued_run_past_its_ttl_expires_with_a_clear_error(initialised: Path) -> None:
    cfg = config.load_yaml(config.config_path(initialised))
    cfg["gateway"]["run_ttl_seconds"] = 1
    config.write_yaml(config.config_path(initialised), cfg)

    async def body(gw: Gateway) -> None:
        session = await new_session(gw)
        await queued(gw, session, "/sleep 1.2\nblocker")
        late = await queued(gw, session, "late")
        done = await gw.delivery.wait(late.id, 5)
        assert done.run.state is RunState.EXPIRED and done.result.outcome == "failed"
        assert "expired" in (done.run.error or "")

    with_gateway(initialised, body)


def _pretend_a_dead_process_claimed_it(root: Path, *, attempts: int) -> None:
    db = Database(config.db_path(root))
    with db.sync_tx() as conn:
        conn.execute(
            "UPDATE runs SET state = 'running', owner = '999999999:dead', attempts = ?, lease_until = ?",
            (attempts, time.time() + 60),
        )
    db.close()


@pytest.mark.sqlite
def test_runs_left_running_by_a_dead_process_are_requeued_and_finish_once(initialised: Path) -> None:
    recorded: list[str] = []

    async def record(gw: Gateway) -> None:
        recorded.append((await queued(gw, await gw.directory.open_bot_chat("default"), "interrupted work", "crash")).id)

    with_gateway(initialised, record, scope=set())
    _pretend_a_dead_process_claimed_it(initialised, attempts=1)

    async def recover(gw: Gateway) -> None:
        done = await gw.delivery.wait(recorded[0], 5)
        assert done.run.state is RunState.COMPLETED and done.run.attempts == 2
        assert [m.content for m in await gw.directory.messages(done.run.session_id)] == [
            "interrupted work",
            "default (echo): interrupted work",
        ]

    with_gateway(initialised, recover)


@pytest.mark.sqlite
def test_runs_interrupted_too_often_fail(initialised: Path) -> None:
    recorded: list[str] = []

    async def record(gw: Gateway) -> None:
        recorded.append((await queued(gw, await gw.directory.open_bot_chat("default"), "poison")).id)

    with_gateway(initialised, record, scope=set())
    _pretend_a_dead_process_claimed_it(initialised, attempts=3)

    async def check(gw: Gateway) -> None:
        run = (await gw.delivery.status(recorded[0])).run
        assert run.state is RunState.FAILED and run.error_code == "interrupted"

    with_gateway(initialised, check)


@pytest.mark.sqlite
def test_a_run_recorded_by_another_process_is_picked_up(initialised: Path) -> None:
    async def body(gw: Gateway) -> None:
        session = await new_session(gw)
        await gw.db.durable()  # another process waits for our commit; in one thread we must not hold it
        # Another process (a CLI beside the gateway) records a run straight into the store.
        other = Gateway(initialised, scope=set())
        run = await queued(other, session, "from elsewhere")
        await other.aclose()
        done = await gw.delivery.wait(run.id, 5)
        assert done.run.reply == "default (echo): from elsewhere"

    with_gateway(initialised, body, poll_seconds=0.02)


def test_memory_tool_adds_replaces_removes_within_limits(initialised: Path) -> None:
    def call(args: dict[str, Any]) -> str:
        return f"/tool memory {json.dumps(args)}"

    async def body(gw: Gateway) -> None:
        session = await new_session(gw)

        async def tool(args: dict[str, Any]) -> dict[str, Any]:
            d = await deliver(gw, session, call(args), key=str(time.time_ns()), wait=5)
            tool_msg = [m for m in await gw.directory.messages(session.id) if m.role == "tool"][-1]
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

    with_gateway(initialised, body)
    user = (initialised / "profiles/default/memories/USER.md").read_text()
    assert "likes coffee" in user and "likes tea" not in user
    assert len(user) <= 2000


@pytest.mark.sqlite
def test_a_database_from_a_newer_backchannel_is_refused(initialised: Path) -> None:
    db = Database(config.db_path(initialised))
    with db.sync_tx() as conn:
        conn.execute("INSERT INTO schema_migrations (name, applied_at) VALUES ('9999_future', 0)")
    db.close()
    with pytest.raises(StoreError, match="newer Backchannel"):
        Database(config.db_path(initialised))


@pytest.mark.sqlite
def test_migrations_are_recorded_once(initialised: Path) -> None:
    Database(config.db_path(initialised)).close()
    Database(config.db_path(initialised)).close()
    conn = sqlite3.connect(config.db_path(initialised))
    names = [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]
    assert names == sorted(name for name, _ in MIGRATIONS) and names[0] == "0001_sessions_messages"
    assert len(names) == len(set(names))
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_stop_right_after_submit_cancels_before_the_turn_begins(initialised: Path) -> None:
    engine = RecordingEngine()

    async def body(gw: Gateway) -> None:
        session = await new_session(gw)
        confirm, worker_may_go = gw.queue.confirm, asyncio.Event()

        async def held(run: Run) -> bool:  # the worker took the claimed run, and waits before its turn begins
            await worker_may_go.wait()
            return await confirm(run)

        gw.queue.confirm = held  # type: ignore[method-assign]
        run = await queued(gw, session, "never mind")
        assert run.state is RunState.RUNNING  # claimed at once: the session was idle
        stopped = await gw.delivery.stop(run.id)  # before its worker had a chance to run it
        assert stopped.run.state is RunState.CANCELLED
        worker_may_go.set()
        after = await queued(gw, session, "next one")
        assert (await gw.delivery.wait(after.id, 5)).run.reply == "ok: next one"

    with_gateway(initialised, body, engine=engine)
    assert engine.seen == ["next one"]


def test_a_draining_gateway_refuses_new_messages_with_503(initialised: Path) -> None:
    async def body(gw: Gateway) -> None:
        session = await new_session(gw)
        gw.queue.drain()
        with pytest.raises(GatewayDraining) as caught:
            await gw.delivery.submit(person(session, "too late"))
        assert caught.value.http_status == 503 and caught.value.retry_after

    with_gateway(initialised, body)


@pytest.mark.sqlite
def test_a_turn_commits_twice_and_a_lone_write_commits_at_the_next_loop_iteration(initialised: Path) -> None:
    """The hot path's cost in commits: a turn is its acceptance and its end, each committed once, and a write
    that no other joins is not held back for one more iteration (a group waits only while writes keep coming)."""

    async def body(gw: Gateway) -> None:
        session = await new_session(gw)
        await deliver(gw, session, "warm up", wait=10)
        before = gw.db.commits
        done = await deliver(gw, session, "counted", wait=10)
        assert done.run.state is RunState.COMPLETED
        assert gw.db.commits - before == 2, "one commit for the run's acceptance, one for its end"

        await gw.db.writable()  # as a service call begins: the group is opened before its first write
        with gw.db.sync_tx() as conn:
            conn.execute("UPDATE sessions SET title = title WHERE id = ?", (session.id,))
        commit = gw.db.pending_commit()
        assert commit is not None
        await asyncio.sleep(0)
        assert commit.done() and commit.exception() is None, "a lone write waited a second iteration"

    with_gateway(initialised, body)


class StoreAwayOnce(RecordingEngine):
    """A model whose first turn meets the store away (as a turn reading its history from a shared store whose server
    restarts): a StoreError, then turns as usual."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    async def step(self, request: ModelRequest, on_delta: OnDelta | None = None) -> Message:
        if not self.failed:
            self.failed = True
            raise StoreError("the store is away for a moment")
        return await super().step(request, on_delta)


def test_a_turn_the_store_cuts_is_not_failed_but_runs_again(initialised: Path) -> None:
    engine = StoreAwayOnce()

    async def body(gw: Gateway) -> None:
        session = await new_session(gw)
        done = await deliver(gw, session, "xthe work", wait=20)
        assert done.run.state is RunState.COMPLETED and done.run.reply == "ok: xthe work", done
        assert engine.seen == ["xthe work"]  # its second turn, the one that answered
        assert [m.content for m in await gw.directory.messages(session.id)] == ["xthe work", "ok: xthe work"]

    with_gateway(initialised, body, engine=engine)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_session_whose_queued_runs_nothing_works_on_is_taken_up_again(
    initialised: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """Whatever leaves a session with queued runs and no worker (a hand-out lost to a race, a notice missed), the
    gateway's periodic look at the store takes its runs up again (issue 38 item 1), on both backends. The run is
    written as nothing in the gateway learns of it: straight into its store, in its own connection."""
    if backend == "postgresql":
        use_shared_store(initialised, request.getfixturevalue("postgres_url"))
    path = config.config_path(initialised)
    data = config.load_yaml(path)
    data.setdefault("store", {})["lease_seconds"] = 1.5  # the look comes every lease/3 seconds
    config.write_yaml(path, data)

    async def body(gw: Gateway) -> None:
        session = await new_session(gw)
        first = await deliver(gw, session, "told", wait=10)
        assert first.run.state is RunState.COMPLETED
        async with gw.db.tx() as tx:  # no announce, no hand-out: nothing in any process is told of it
            await tx.run(
                "INSERT INTO runs (id, idempotency_key, fingerprint, sender, profile, session_id, message, hops,"
                " chain, state, created_at, updated_at, origin, landed) SELECT 'run_untold', 'untold-key',"
                " 'untold-fp', sender, profile, session_id, 'untold', 0, '[]', 'queued', created_at, updated_at,"
                " 'run_untold', 'queued' FROM runs WHERE id = ?",
                (first.run.id,),
            )
        await gw.db.durable()
        ended = await gw.queue.wait("run_untold", 20)
        assert ended.state is RunState.COMPLETED and (ended.reply or "").endswith(": untold"), ended

    run_with_gateway(initialised, body)


def test_a_run_claimed_at_its_record_runs_when_another_send_handed_its_session_out_first(
    initialised: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two sends to an idle session at once: the first is recorded already claimed, the second queued behind it; on
    a shared store the second's answer can come back first and hand the session to a worker. The claimed run must
    still run (it was dropped: running in the store, owned and renewed here, and no turn, so the session stalled)."""
    from backchannel.store import runs as runstore

    record = runstore.record
    handed_first: list[str] = []

    async def body(gw: Gateway) -> None:
        session = await new_session(gw)

        async def record_then_the_other_send_hands_out(*args: Any, **kwargs: Any) -> Any:
            run, created = await record(*args, **kwargs)
            if run.state is RunState.RUNNING and not handed_first:  # the other send's answer, first
                handed_first.append(run.id)
                gw.queue.take_up(run.session_id)
            return run, created

        monkeypatch.setattr(runstore, "record", record_then_the_other_send_hands_out)
        claimed = await queued(gw, session, "c first")
        assert handed_first == [claimed.id]
        done = await gw.delivery.wait(claimed.id, 10)
        assert done.run.state is RunState.COMPLETED, done.run
        after = await queued(gw, session, "c after")  # and the session goes on
        assert (await gw.delivery.wait(after.id, 10)).run.state is RunState.COMPLETED

    with_gateway(initialised, body, engine=RecordingEngine())
