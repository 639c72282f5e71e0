"""The store's contract: the guarantees the fault tests rely on, asserted through the store's public functions, on
every backend (DESIGN section 10, issue 24).

- An idempotency key is handled once: a second record under the key returns the first run (also once it has
  finished, and after the store is closed and opened again); the same key for other words is a conflict.
- Where a message lands: its session idle, it starts (claimed at once for the gateway that asks); else it waits
  queued, or joins the running turn of its own caller when sent to steer; held, it waits for the person. Past the
  session's queue cap a new run is refused (queue_full) and a replay of its key is still answered; its files and a
  keyless retry within its window are recorded once; gateways recording into one session at the same moment start
  one run between them and never pass the cap.
- A run's reply and its state commit together: `finish` writes the state, the reply and the messages, or none.
- FIFO per session, one running run per session: claims take a session's queued runs in the order they were
  recorded, never a second while one runs, also when several gateways claim at the same moment; other sessions
  are not held up.
- Reclaim after a crash: a running run whose owner died or whose lease ran out is requeued once (then claimed
  again as the same run); a finished run, or one a live owner holds, is left alone; the old owner's late finish
  is refused, also when the same owner claimed the run again since (the claim's fencing token).
- One owning gateway per session, fenced by an epoch: a claim takes a session nobody owns (epoch + 1) and keeps it;
  another live gateway neither claims in it nor waits on its row (on SQLite, one gateway: every claim may take);
  a session whose owner is gone is taken (epoch + 1), a stopping gateway gives its sessions up, and a late write
  of a turn claimed under an older epoch is refused.
- A snapshot (what `store copy` reads from) sees the store as it was when it began, whatever another gateway
  commits meanwhile; a shared store counts the other processes that have it open (SQLite cannot tell: None).

Each backend is a `Backend` over the same calls: SQLite (a file of the test's own), and PostgreSQL (a fresh database
of the session's throwaway cluster: the `postgres_url` fixture). Each test runs in an event loop of its own, the
store opened inside it.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from backchannel import keys
from backchannel.errors import Conflict, LimitReached, StoreError
from backchannel.messages import Attachment, Message
from backchannel.records import Run
from backchannel.store import push, questions, retention, runs, sessions
from backchannel.store.db import Database
from backchannel.store.driver import Db
from backchannel.store.runs import NewRun, RunState

OWNER = "gateway-1"
OTHER = "gateway-2"
LEASE = 30.0
RAN_OUT = -1.0  # a lease that has already run out when it is taken (what a stalled owner's looks like later)


@dataclass
class Backend:
    """One store implementation under test: its database, and how to open it again (a restart)."""

    make: Callable[[], Db]
    db: Db

    async def reopen(self) -> None:
        await self.db.aclose()
        self.db = self.make()
        await self.db.open()

    async def another(self) -> Db:
        """A second connection to the same store (another gateway), open."""
        other = self.make()
        await other.open()
        return other


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Callable[[], Db]:
    """How to open the backend under test (opened inside each test's own event loop)."""
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("store") / "state.db"
        return lambda: Database(path)
    from backchannel.store.pg import PgDatabase

    url: str = request.getfixturevalue("postgres_url")
    return lambda: PgDatabase(url)


def contract(body: Callable[[Backend], Awaitable[None]]) -> Callable[[Callable[[], Db]], None]:
    """A contract test: `body` run against the backend the `store` fixture opens, in a loop of its own."""

    @functools.wraps(body)
    def test(store: Callable[[], Db]) -> None:
        async def run() -> None:
            backend = Backend(store, store())
            await backend.db.open()
            try:
                await body(backend)
            finally:
                await backend.db.aclose()

        asyncio.run(run())

    return test


async def session(store: Backend) -> str:
    return (await sessions.create_session(store.db, "main")).id


async def send(store: Backend, session_id: str, text: str, *, key: str | None = None) -> tuple[Run, bool]:
    new = NewRun(sender="person", profile="main", session_id=session_id, message=text, idempotency_key=key)
    return await runs.record(store.db, new)


async def claim(
    store: Backend, session_id: str, *, owner: str = OWNER, lease: float = LEASE, db: Db | None = None
) -> Run | None:
    claimed, _expired = await runs.claim_next(db or store.db, session_id, owner=owner, lease_seconds=lease)
    return claimed


async def finish(store: Backend, run: Run, reply: str, *, owner: str = OWNER) -> Run | None:
    said = [Message(role="user", content=run.message), Message(role="assistant", content=reply)]
    return (await runs.finish(store.db, run, owner=owner, state=RunState.COMPLETED, reply=reply, messages=said)).run


async def contents(store: Backend, session_id: str) -> list[str]:
    return [m.content for m in await sessions.list_messages(store.db, session_id)]


# --- an idempotency key is handled once ---------------------------------------------------------------


@contract
async def test_a_second_record_under_a_key_returns_the_first_run(store: Backend) -> None:
    sid = await session(store)
    first, created = await send(store, sid, "hello", key="k-1")
    again, created_again = await send(store, sid, "hello", key="k-1")
    assert created and not created_again
    assert again.id == first.id
    assert [r.id for r in await runs.list_runs(store.db, session_id=sid)] == [first.id]


@contract
async def test_a_key_is_handled_once_after_its_run_finished_and_after_a_restart(store: Backend) -> None:
    sid = await session(store)
    first, _ = await send(store, sid, "hello", key="k-1")
    claimed = await claim(store, sid)
    assert claimed is not None and claimed.id == first.id
    assert await finish(store, claimed, "hi") is not None
    await store.reopen()
    again, created = await send(store, sid, "hello", key="k-1")
    assert not created
    assert (again.id, again.state, again.reply) == (first.id, RunState.COMPLETED, "hi")
    assert await claim(store, sid) is None  # nothing new was queued under the key
    assert await contents(store, sid) == ["hello", "hi"]


@contract
async def test_the_same_key_for_other_words_is_a_conflict_and_records_nothing(store: Backend) -> None:
    sid = await session(store)
    first, _ = await send(store, sid, "hello", key="k-1")
    with pytest.raises(Conflict, match="k-1"):
        await send(store, sid, "something else", key="k-1")
    assert [r.id for r in await runs.list_runs(store.db, session_id=sid)] == [first.id]


# --- where a message lands, and the queue's cap -----------------------------------------------------------


def new_run(sid: str, text: str, key: str | None, *, sender: str = "human:api", **fields: Any) -> NewRun:
    return NewRun(sender=sender, profile="main", session_id=sid, message=text, idempotency_key=key, **fields)


@contract
async def test_a_message_starts_claimed_waits_queued_or_joins_its_own_callers_turn(store: Backend) -> None:
    sid = await session(store)
    started, _ = await runs.record(store.db, new_run(sid, "one", "k-1"), claim_for=OWNER, lease_seconds=LEASE)
    assert (started.state, started.landed, started.attempts, started.fencing) == (RunState.RUNNING, "started", 1, 1)
    queued, _ = await runs.record(store.db, new_run(sid, "two", "k-2"), claim_for=OWNER)
    assert (queued.state, queued.landed, queued.attempts) == (RunState.QUEUED, "queued", 0)
    steered, _ = await runs.record(store.db, new_run(sid, "three", "k-3", sender="human:cli", steer=True))
    assert (steered.state, steered.landed) == (RunState.QUEUED, "steered")
    another, _ = await runs.record(store.db, new_run(sid, "four", "k-4", sender="peer:a/main", steer=True))
    assert another.landed == "queued"  # another caller's message waits its turn
    held, _ = await runs.record(store.db, new_run(sid, "five", "k-5", held=True, ttl_seconds=60.0))
    assert (held.state, held.landed) == (RunState.HELD, None)
    assert held.expires_at is not None and held.expires_at > held.created_at
    idle = await session(store)
    unclaimed, _ = await runs.record(store.db, new_run(idle, "six", "k-6"))
    assert (unclaimed.state, unclaimed.landed) == (RunState.QUEUED, "started")  # no one asked to claim it


@contract
async def test_past_the_cap_a_new_run_is_refused_and_a_replay_is_answered(store: Backend) -> None:
    sid = await session(store)
    for n in range(2):
        await runs.record(store.db, new_run(sid, f"m{n}", f"k-{n}"), max_queued=2)
    with pytest.raises(LimitReached) as refused:
        await runs.record(store.db, new_run(sid, "m2", "k-2"), max_queued=2)
    assert refused.value.code == "queue_full"
    assert refused.value.message == (
        f"session {sid!r} already has 2 messages waiting (gateway.max_queued_per_session is 2);"
        " try again once it has answered some"
    )
    again, created = await runs.record(store.db, new_run(sid, "m0", "k-0"), max_queued=2)
    assert not created and again.message == "m0"
    with pytest.raises(Conflict, match="k-0") as conflict:
        await runs.record(store.db, new_run(sid, "other", "k-0"), max_queued=2)
    assert conflict.value.code == "idempotency_key_conflict"
    assert len(await runs.list_runs(store.db, session_id=sid)) == 2


@contract
async def test_a_messages_files_and_a_keyless_retry_are_recorded_once(store: Backend) -> None:
    sid = await session(store)
    files = (Attachment("a.txt", "text/plain", b"alpha"), Attachment(None, "image/png", None, "https://x.example/b"))
    run, _ = await runs.record(store.db, new_run(sid, "with files", "k-1", files=files))
    again, created = await runs.record(store.db, new_run(sid, "with files", "k-1", files=files))
    assert not created and again.id == run.id
    assert await runs.files_of(store.db, [run.id]) == {run.id: list(files)}
    first, _ = await runs.record(store.db, new_run(sid, "keyless", None, retry_window=60.0))
    retried, created = await runs.record(store.db, new_run(sid, "keyless", None, retry_window=60.0))
    assert (retried.id, created) == (first.id, False)
    fresh, created = await runs.record(store.db, new_run(sid, "keyless", None))
    assert created and fresh.id != first.id  # no window: a new run


@contract
async def test_gateways_recording_into_one_session_at_once_start_one_run_and_keep_the_cap(store: Backend) -> None:
    sid = await session(store)
    others = [await store.another() for _ in range(5)]
    try:

        async def one(n: int, db: Db) -> Run | BaseException:
            try:
                run, _ = await runs.record(db, new_run(sid, f"m{n}", f"k-{n}"), claim_for=f"gw-{n}", max_queued=2)
                return run
            except LimitReached as exc:
                return exc

        outcomes = await asyncio.gather(*(one(n, db) for n, db in enumerate([store.db, *others])))
    finally:
        for db in others:
            await db.aclose()
    recorded = [o for o in outcomes if isinstance(o, Run)]
    assert [o.state for o in recorded].count(RunState.RUNNING) == 1
    assert [o.state for o in recorded].count(RunState.QUEUED) == 2
    assert [o.code for o in outcomes if isinstance(o, LimitReached)] == ["queue_full"] * 3
    stored = await runs.list_runs(store.db, session_id=sid)
    assert sorted(r.id for r in stored) == sorted(r.id for r in recorded)


# --- a reply and its state commit together --------------------------------------------------------------


@contract
async def test_finish_writes_the_state_the_reply_and_the_messages(store: Backend) -> None:
    sid = await session(store)
    await send(store, sid, "hello", key="k-1")
    claimed = await claim(store, sid)
    assert claimed is not None
    done = await finish(store, claimed, "hi")
    assert done is not None and (done.state, done.reply) == (RunState.COMPLETED, "hi")
    stored = await runs.get(store.db, claimed.id)
    assert (stored.state, stored.reply) == (RunState.COMPLETED, "hi")
    assert await contents(store, sid) == ["hello", "hi"]
    assert (await sessions.get_session(store.db, sid)).message_count == 2


@contract
async def test_a_finish_whose_messages_cannot_be_written_writes_nothing(store: Backend) -> None:
    sid = await session(store)
    await send(store, sid, "hello", key="k-1")
    claimed = await claim(store, sid)
    assert claimed is not None
    unwritable = [Message(role="user", content="hello"), Message(role="assistant", content=None)]  # type: ignore[arg-type]
    with pytest.raises(StoreError):
        await runs.finish(store.db, claimed, owner=OWNER, state=RunState.COMPLETED, reply="hi", messages=unwritable)
    await store.reopen()  # what is on disk, not what the connection still holds
    stored = await runs.get(store.db, claimed.id)
    assert (stored.state, stored.reply) == (RunState.RUNNING, None)
    assert await contents(store, sid) == []
    assert (await sessions.get_session(store.db, sid)).message_count == 0
    assert await finish(store, stored, "hi") is not None  # its owner can still end it, once
    assert await contents(store, sid) == ["hello", "hi"]


@contract
async def test_a_finish_by_another_owner_writes_nothing(store: Backend) -> None:
    sid = await session(store)
    await send(store, sid, "hello", key="k-1")
    claimed = await claim(store, sid)
    assert claimed is not None
    assert await finish(store, claimed, "not mine", owner=OTHER) is None
    stored = await runs.get(store.db, claimed.id)
    assert (stored.state, stored.reply) == (RunState.RUNNING, None)
    assert await contents(store, sid) == []


# --- FIFO per session, one running run per session ------------------------------------------------------


@contract
async def test_claims_take_a_sessions_runs_in_the_order_they_were_recorded(store: Backend) -> None:
    sid = await session(store)
    recorded = [(await send(store, sid, f"message {n}", key=f"k-{n}"))[0].id for n in range(4)]
    taken: list[str] = []
    while (claimed := await claim(store, sid)) is not None:
        taken.append(claimed.id)
        assert await finish(store, claimed, f"reply to {claimed.message}") is not None
    assert taken == recorded
    assert (await contents(store, sid))[::2] == [f"message {n}" for n in range(4)]


@contract
async def test_a_run_parked_on_its_persons_question_does_not_block_its_session_and_resumes_behind_it(
    store: Backend,
) -> None:
    """Issue 42: a turn that asks its person parks its run `input_required` with the question (one commit); the
    session's later messages are claimed meanwhile; the answer (once: a second is `question_closed`) queues the
    same run again, after the runs queued before the answer and before those queued after it."""
    sid = await session(store)
    asking, _ = await send(store, sid, "/ask colour?", key="k-ask")
    claimed = await claim(store, sid)
    assert claimed is not None and claimed.id == asking.id
    asked = questions.NewQuestion("q_contract", "colour?", ("red", "blue"), "blue", None)
    parked = await questions.park(store.db, claimed, asked, owner=OWNER, messages=[Message("user", "/ask colour?")])
    assert parked is not None and parked[0].state is RunState.INPUT_REQUIRED and parked[1].state == "open"
    assert not parked[0].state.terminal
    before, _ = await send(store, sid, "before the answer", key="k-before")
    first = await claim(store, sid)
    assert first is not None and first.id == before.id  # not blocked by the run waiting for its person
    waiting, _ = await send(store, sid, "still before", key="k-waiting")
    question, resumed = await questions.close(store.db, "q_contract", state="answered", answer="red", by="human:cli")
    assert question.answer == "red" and resumed.id == asking.id and resumed.state is RunState.QUEUED
    with pytest.raises(Conflict) as closed:
        await questions.close(store.db, "q_contract", state="answered", answer="blue", by="human:api")
    assert closed.value.code == "question_closed"
    after, _ = await send(store, sid, "after the answer", key="k-after")
    assert await runs.queue_position(store.db, resumed) == 2
    assert await finish(store, first, "done") is not None
    taken = []
    while (next_run := await claim(store, sid)) is not None:
        taken.append(next_run.id)
        assert await finish(store, next_run, "done") is not None
    assert taken == [waiting.id, asking.id, after.id]
    assert (await questions.get(store.db, "q_contract")).answered_by == "human:cli"


@contract
async def test_a_peers_question_to_one_of_our_agents_is_the_agents_once_and_not_in_our_persons_list(
    store: Backend,
) -> None:
    """A question a peer's run asks our sender (issue 42): our person's in their list, our agent's out of it (that
    agent answers it), each the last relayed of its message, closed once (`question_closed` for a second)."""

    def relayed(outbound_id: int, asker: str, text: str) -> questions.Relayed:
        return questions.Relayed(
            f"q_peer_{outbound_id}", outbound_id, "peer:beta", f"run_{outbound_id}", None, asker, None, text
        )

    assert await questions.relayed_last(store.db, 7) is None
    persons, new = await questions.relay(store.db, relayed(6, "human:cli", "colour?"))
    agents, _ = await questions.relay(store.db, relayed(7, "default/20260101_000000_abcdef", "size?"))
    assert new and await questions.relay(store.db, relayed(6, "human:cli", "colour?")) == (persons, False)  # once
    assert [q.id for q in await questions.listed(store.db)] == [persons.id]  # the person's list
    assert {q.id for q in await questions.listed(store.db, for_peer=None)} == {persons.id, agents.id}
    assert await questions.listed(store.db, for_peer=True) == []
    assert (await questions.relayed_last(store.db, 7)) == agents and agents.from_peer
    closed = await questions.close_relayed(store.db, agents.id, state="answered", answer="M", by=agents.asker)
    assert closed.answer == "M" and await questions.relayed_last(store.db, 7) == closed
    with pytest.raises(Conflict) as again:
        await questions.close_relayed(store.db, agents.id, state="answered", answer="S", by=agents.asker)
    assert again.value.code == "question_closed"


@contract
async def test_no_second_run_of_a_session_is_claimed_while_one_runs(store: Backend) -> None:
    sid = await session(store)
    await send(store, sid, "first", key="k-1")
    await send(store, sid, "second", key="k-2")
    running = await claim(store, sid)
    assert running is not None and running.message == "first"
    assert await claim(store, sid) is None
    assert await claim(store, sid, owner=OTHER) is None  # whoever asks
    third, _ = await runs.record(
        store.db,
        NewRun(sender="person", profile="main", session_id=sid, message="third", idempotency_key="k-3"),
        claim_for=OWNER,
    )
    assert third.state is RunState.QUEUED  # recorded behind the running one, not claimed with it
    assert (await runs.count_by_state(store.db, (RunState.RUNNING,)))[RunState.RUNNING] == 1
    assert await finish(store, running, "done") is not None
    after = await claim(store, sid)
    assert after is not None and after.message == "second"


@contract
async def test_a_turn_starts_when_its_session_was_seen_free_not_when_its_message_was_handed_in(store: Backend) -> None:
    # A message handed in a while ago (its record waited for a connection, or for the session's last turn to end)
    # starts now: its turn cannot have begun before the one before it ended.
    sid = await session(store)
    handed_in = time.time() - 60
    before = time.time()
    new = NewRun(sender="person", profile="main", session_id=sid, message="late", idempotency_key="k-1")
    run, _ = await runs.record(store.db, new, claim_for=OWNER, now=handed_in, lease_seconds=LEASE)
    assert run.state is RunState.RUNNING
    assert run.created_at == handed_in
    assert run.started_at is not None and run.started_at >= before
    ended = await finish(store, run, "done")
    assert ended is not None and ended.finished_at is not None
    await send(store, sid, "next", key="k-2")
    following = await claim(store, sid)
    assert following is not None and following.started_at is not None
    assert following.started_at >= ended.finished_at


@contract
async def test_a_running_run_does_not_hold_up_another_session(store: Backend) -> None:
    busy, idle = await session(store), await session(store)
    await send(store, busy, "long turn", key="k-1")
    await send(store, idle, "quick one", key="k-2")
    assert await claim(store, busy) is not None
    other = await claim(store, idle)
    assert other is not None and other.session_id == idle


# --- reclaim after a crash ---------------------------------------------------------------------------


@contract
async def test_a_dead_owners_run_is_requeued_once_and_claimed_again_as_the_same_run(store: Backend) -> None:
    sid = await session(store)
    first, _ = await send(store, sid, "hello", key="k-1")
    claimed = await claim(store, sid, owner="gateway-dead")
    assert claimed is not None
    await store.reopen()  # the crash: the next gateway opens the store
    changed = await runs.reclaim(store.db, is_dead=lambda owner: owner == "gateway-dead", max_attempts=3)
    assert [(r.id, r.state) for r in changed] == [(first.id, RunState.QUEUED)]
    assert await runs.reclaim(store.db, is_dead=lambda owner: owner == "gateway-dead", max_attempts=3) == []
    again = await claim(store, sid, owner=OTHER)
    assert again is not None and (again.id, again.attempts) == (first.id, 2)
    assert await runs.reclaim(store.db, is_dead=lambda owner: owner == "gateway-dead", max_attempts=3) == []
    assert await finish(store, claimed, "late", owner="gateway-dead") is None  # the old owner's late reply is refused
    assert await finish(store, again, "hi", owner=OTHER) is not None
    assert await contents(store, sid) == ["hello", "hi"]
    assert [r.id for r in await runs.list_runs(store.db, session_id=sid)] == [first.id]


@contract
async def test_a_run_whose_lease_ran_out_is_requeued_and_one_a_live_owner_holds_is_not(store: Backend) -> None:
    stalled, held = await session(store), await session(store)
    lapsed, _ = await send(store, stalled, "stalled", key="k-1")
    kept, _ = await send(store, held, "kept", key="k-2")
    assert await claim(store, stalled, lease=RAN_OUT) is not None
    assert await claim(store, held) is not None
    changed = await runs.reclaim(store.db, is_dead=lambda owner: False, max_attempts=3)
    assert [r.id for r in changed] == [lapsed.id]
    assert (await runs.get(store.db, lapsed.id)).state is RunState.QUEUED
    assert (await runs.get(store.db, kept.id)).state is RunState.RUNNING


@contract
async def test_a_finished_run_is_not_reclaimed(store: Backend) -> None:
    sid = await session(store)
    await send(store, sid, "hello", key="k-1")
    claimed = await claim(store, sid, lease=RAN_OUT)
    assert claimed is not None
    assert await finish(store, claimed, "hi") is not None
    await store.reopen()
    assert await runs.reclaim(store.db, is_dead=lambda owner: True, max_attempts=3) == []
    stored = await runs.get(store.db, claimed.id)
    assert (stored.state, stored.reply, stored.attempts) == (RunState.COMPLETED, "hi", 1)
    assert await claim(store, sid) is None


@contract
async def test_a_run_interrupted_max_attempts_times_fails_instead_of_running_again(store: Backend) -> None:
    sid = await session(store)
    await send(store, sid, "hello", key="k-1")
    for attempt in (1, 2):
        claimed = await claim(store, sid, owner="gateway-dead")
        assert claimed is not None and claimed.attempts == attempt
        (back,) = await runs.reclaim(store.db, is_dead=lambda owner: owner == "gateway-dead", max_attempts=2)
    assert (back.state, back.error_code) == (RunState.FAILED, "interrupted")
    assert await claim(store, sid) is None


@contract
async def test_a_finish_under_an_old_claim_is_refused_once_the_run_was_claimed_again(store: Backend) -> None:
    sid = await session(store)
    first, _ = await send(store, sid, "hello", key="k-1")
    stalled = await claim(store, sid, lease=RAN_OUT)  # a gateway that paused past its lease
    assert stalled is not None
    (back,) = await runs.reclaim(store.db, is_dead=lambda owner: False, max_attempts=3)
    assert back.state is RunState.QUEUED
    again = await claim(store, sid)  # the same owner (a resumed process) claims it anew: another fencing token
    assert again is not None and again.id == first.id and again.fencing > stalled.fencing
    assert await finish(store, stalled, "from the paused turn") is None
    assert await finish(store, again, "hi") is not None
    assert await contents(store, sid) == ["hello", "hi"]


@contract
async def test_gateways_claiming_one_session_at_the_same_moment_get_one_run_between_them(store: Backend) -> None:
    sid = await session(store)
    for n in range(3):
        await send(store, sid, f"message {n}", key=f"k-{n}")
    others = [await store.another() for _ in range(3)]
    try:
        taken: list[str] = []
        for _ in range(3):
            claims = await asyncio.gather(
                *(claim(store, sid, owner=f"gateway-{i}", db=db) for i, db in enumerate([store.db, *others]))
            )
            won = [c for c in claims if c is not None]
            assert len(won) <= 1, [c.id for c in won]  # never two running runs of one session
            if won:
                taken.append(won[0].id)
                said = [Message(role="assistant", content="done")]
                winner = won[0]
                owner = next(f"gateway-{i}" for i, c in enumerate(claims) if c is winner)
                assert (await runs.finish(store.db, winner, owner=owner, state=RunState.COMPLETED, messages=said)).run
        while (rest := await claim(store, sid)) is not None:  # a claim another one passed over is taken now
            taken.append(rest.id)
            assert await finish(store, rest, "done") is not None
        assert [r.message for r in await runs.list_runs(store.db, session_id=sid)][::-1] == [
            f"message {n}" for n in range(3)
        ]
        assert taken == [r.id for r in await runs.list_runs(store.db, session_id=sid)][::-1]  # in their order
    finally:
        for db in others:
            await db.aclose()


# --- one owning gateway per session, fenced by an epoch ------------------------------------------------------


async def live(store: Backend, owner: str) -> Db:
    """Another gateway's connection, alive as `owner` (its liveness lock held while it is open)."""
    db = await store.another()
    await db.live_as(owner)
    return db


@contract
async def test_a_session_owned_by_a_live_gateway_is_not_claimed_by_another(store: Backend) -> None:
    sid = await session(store)
    first = await live(store, OWNER)
    try:
        await send(store, sid, "one", key="k-1")
        claimed = await claim(store, sid, db=first)
        assert claimed is not None
        assert await runs.owner_of(store.db, sid) == (OWNER, 1)
        assert (await runs.finish(first, claimed, owner=OWNER, state=RunState.COMPLETED, reply="hi")).run is not None
        await send(store, sid, "two", key="k-2")
        shared = store.db.dialect.row_locks
        if not shared:  # SQLite has one gateway: any claim may take the session
            assert await claim(store, sid, owner=OTHER) is not None
            assert await runs.owner_of(store.db, sid) == (OTHER, 2)
            return
        async with first.tx() as tx:  # the owner holds the session's row: another's claim does not wait on it
            await tx.one("SELECT 1 FROM sessions WHERE id = ? FOR UPDATE", (sid,))
            assert await asyncio.wait_for(claim(store, sid, owner=OTHER), 5) is None
        assert await claim(store, sid, owner=OTHER) is None
        recorded, _ = await runs.record(store.db, new_run(sid, "three", "k-3"), claim_for=OTHER)
        assert recorded.state is RunState.QUEUED  # recorded, left for its owner
        assert await runs.owner_of(store.db, sid) == (OWNER, 1)
        again = await claim(store, sid, db=first)
        assert again is not None and again.message == "two"
        assert await runs.owner_of(store.db, sid) == (OWNER, 1)  # its own session: the epoch stays
    finally:
        await first.aclose()


@contract
async def test_a_session_whose_owner_is_gone_is_taken_under_the_next_epoch(store: Backend) -> None:
    sid = await session(store)
    first = await live(store, OWNER)
    await send(store, sid, "one", key="k-1")
    await send(store, sid, "two", key="k-2")
    claimed = await claim(store, sid, db=first)
    assert claimed is not None
    assert (await runs.finish(first, claimed, owner=OWNER, state=RunState.COMPLETED, reply="hi")).run is not None
    await first.aclose()  # the owner ends: its liveness lock is free
    assert await runs.owners_gone(store.db, mine=OTHER) == ({OWNER} if store.db.dialect.row_locks else set())
    taken = await claim(store, sid, owner=OTHER)
    assert taken is not None and taken.message == "two"
    assert await runs.owner_of(store.db, sid) == (OTHER, 2)
    assert await finish(store, taken, "hi", owner=OTHER) is not None


@contract
async def test_a_late_write_under_an_old_epoch_is_refused(store: Backend) -> None:
    sid = await session(store)
    first = await live(store, OWNER)
    try:
        await send(store, sid, "hello", key="k-1")
        stalled = await claim(store, sid, lease=RAN_OUT, db=first)  # an owner paused past its lease
        assert stalled is not None and await runs.owner_of(store.db, sid) == (OWNER, 1)
        (back,) = await runs.reclaim(store.db, is_dead=lambda owner: False, max_attempts=3)
        assert back.state is RunState.QUEUED
        assert await runs.owner_of(store.db, sid) == (None, 1)  # given up with its lapsed turn
        again = await claim(store, sid, owner=OTHER)
        assert again is not None and again.id == stalled.id
        assert await runs.owner_of(store.db, sid) == (OTHER, 2)
        await runs.spend(first, stalled, runs.Spent(tokens_in=100))
        await runs.renew_leases(first, [stalled.id], owner=OWNER, lease_seconds=LEASE)
        assert await runs.take_steered(first, stalled) == []
        assert (await runs.finish(first, stalled, owner=OWNER, state=RunState.COMPLETED, reply="late")).run is None
        assert await runs.unclaim(first, stalled, owner=OWNER) is None
        now = await runs.get(store.db, stalled.id)
        assert (now.state, now.tokens_in) == (RunState.RUNNING, 0)
        assert await finish(store, again, "hi", owner=OTHER) is not None
        assert await contents(store, sid) == ["hello", "hi"]
    finally:
        await first.aclose()


@contract
async def test_a_write_is_refused_once_its_sessions_epoch_moved_on(store: Backend) -> None:
    sid = await session(store)
    await send(store, sid, "hello", key="k-1")
    claimed = await claim(store, sid)
    assert claimed is not None
    async with store.db.tx() as tx:  # what a taking gateway does to the session (its run's claim left as it was)
        await tx.run("UPDATE sessions SET owner = ?, epoch = epoch + 1 WHERE id = ?", (OTHER, sid))
    assert await finish(store, claimed, "late") is None
    assert (await runs.get(store.db, claimed.id)).state is RunState.RUNNING


@contract
async def test_a_stopping_gateway_gives_its_sessions_up(store: Backend) -> None:
    sid = await session(store)
    await send(store, sid, "one", key="k-1")
    await send(store, sid, "two", key="k-2")
    first = await live(store, OWNER)
    try:
        claimed = await claim(store, sid, db=first)
        assert claimed is not None
        assert (await runs.finish(first, claimed, owner=OWNER, state=RunState.COMPLETED, reply="hi")).run is not None
        assert await runs.give_up(first, OWNER) == 1
        assert await runs.owner_of(store.db, sid) == (None, 1)
        taken = await claim(store, sid, owner=OTHER)  # while the first still runs: nobody owns the session
        assert taken is not None and await runs.owner_of(store.db, sid) == (OTHER, 2)
    finally:
        await first.aclose()


# --- a snapshot, and who else has the store open -------------------------------------------------------------


@contract
async def test_a_snapshot_sees_the_store_as_it_was_when_it_began(store: Backend) -> None:
    sid = await session(store)
    first, _ = await send(store, sid, "before")
    other = await store.another()  # another gateway
    try:
        async with store.db.snapshot() as snapshot:
            seen_first = [r["id"] for r in await snapshot.all("SELECT id FROM runs ORDER BY seq")]
            later, _ = await runs.record(other, NewRun("person", "main", sid, "after", idempotency_key=None))
            await other.durable()
            seen_then = [r["id"] for r in await snapshot.all("SELECT id FROM runs ORDER BY seq")]
    finally:
        await other.aclose()
    assert seen_first == seen_then == [first.id]
    assert {r.id for r in await runs.list_runs(store.db, session_id=sid)} == {first.id, later.id}


@contract
async def test_a_shared_store_counts_the_other_processes_that_have_it_open(store: Backend) -> None:
    alone = await store.db.other_processes()
    other = await store.another()
    try:
        beside = await store.db.other_processes()
    finally:
        await other.aclose()
    assert (alone, beside) == ((0, 1) if store.db.dialect.row_locks else (None, None))


# --- retention (store.keep_days) ----------------------------------------------------------------------------


@contract
async def test_retention_removes_only_the_text_of_what_ended_and_owes_nothing(store: Backend) -> None:
    """What ended loses its text; a queued run, a running one, and an ended one whose sender is owed its wake-up
    keep theirs (the wake-up is made from the reply), until that wake-up exists."""
    sid, other, sender = await session(store), await session(store), await session(store)
    done, _ = await send(store, sid, "done long ago", key="k-done")
    claimed = await claim(store, sid)
    assert claimed is not None and await finish(store, claimed, "the old reply") is not None
    queued, _ = await send(store, sid, "still waiting", key="k-queued")
    owed_new = NewRun(
        sender=f"main/{sender}",
        profile="main",
        session_id=other,
        message="owed",
        idempotency_key="k-owed",
        sender_session=sender,
        wake=True,
    )
    owed, _ = await runs.record(store.db, owed_new)
    running = await claim(store, other)
    assert running is not None and running.id == owed.id
    later = 10**10  # every run was created before this
    assert await retention.prune(store.db, before=later, now=later) == 1
    assert ((await runs.get(store.db, done.id)).message, (await runs.get(store.db, done.id)).reply) == (
        retention.REMOVED,
        retention.REMOVED,
    )
    assert (await runs.get(store.db, queued.id)).message == "still waiting"
    assert (await runs.get(store.db, owed.id)).message == "owed"  # running
    assert await finish(store, running, "the owed reply") is not None
    assert await retention.prune(store.db, before=later, now=later) == 0  # ended, but its wake-up is owed
    assert (await runs.get(store.db, owed.id)).reply == "the owed reply"
    wake = NewRun(
        sender=f"main/{other}",
        profile="main",
        session_id=sender,
        message="[Reply] the owed reply",
        idempotency_key=keys.wake(owed.id),
    )
    await runs.record(store.db, wake)
    assert await retention.prune(store.db, before=later, now=later) == 1  # woken: its text may go now
    assert (await runs.get(store.db, owed.id)).reply == retention.REMOVED
    # The rows stay: the ledger still lists every run.
    assert {r.id for r in await runs.list_runs(store.db, session_id=sid)} == {done.id, queued.id}


@contract
async def test_retention_leaves_the_text_of_a_run_whose_push_notifications_are_owed(store: Backend) -> None:
    """A push notification's body is built from its run when it is delivered: the run keeps its text while a
    config still waits for its end or a notification of it is pending, and loses it once they are settled."""
    sid = await session(store)
    run, _ = await send(store, sid, "watched", key="k-watched")
    claimed = await claim(store, sid)
    assert claimed is not None
    ended = await finish(store, claimed, "the watched reply")
    assert ended is not None
    config = await push.save(
        store.db,
        task_id=run.id,
        config_id="hook",
        owner="human:a2a",
        profile="main",
        receiver=push.Receiver("https://hooks.example/a"),
        version="1.0",
        max_per_task=10,
        max_per_owner=10,
    )
    later = 10**10
    assert await retention.prune(store.db, before=later, now=later) == 0  # its config waits for its end
    told = push.Told(ended.state, ended.updated_at)
    assert await push.enqueue(store.db, config.seq, [push.Event("status:completed", "pn_1")], told=told) == 1
    assert await retention.prune(store.db, before=later, now=later) == 0  # its end is owed to the receiver
    assert (await runs.get(store.db, run.id)).reply == "the watched reply"
    (owed,) = await push.due(store.db, now=later, per_owner=1)
    await push.delivered(store.db, owed.seq, attempts=1)
    assert await retention.prune(store.db, before=later, now=later) == 1  # told: its text may go now
    assert (await runs.get(store.db, run.id)).reply == retention.REMOVED
