"""The store's contract: the guarantees the fault tests rely on, asserted through the store's public functions, on
every backend (DESIGN section 10, issue 24).

- An idempotency key is handled once: a second record under the key returns the first run (also once it has
  finished, and after the store is closed and opened again); the same key for other words is a conflict.
- A run's reply and its state commit together: `finish` writes the state, the reply and the messages, or none.
- FIFO per session, one running run per session: claims take a session's queued runs in the order they were
  recorded, never a second while one runs; other sessions are not held up.
- Reclaim after a crash: a running run whose owner died or whose lease ran out is requeued once (then claimed
  again as the same run); a finished run, or one a live owner holds, is left alone; the old owner's late finish
  is refused.

Each backend is a `Backend` over the same calls. Today only SQLite; the PostgreSQL id is there, skipped until its
store exists (then its `Backend` opens a fresh database of the session's cluster: the `postgres_url` fixture).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from backchannel.errors import Conflict, StoreError
from backchannel.messages import Message
from backchannel.store import runs, sessions
from backchannel.store.db import Database
from backchannel.store.runs import NewRun, RunRow, RunState

OWNER = "gateway-1"
OTHER = "gateway-2"
LEASE = 30.0
RAN_OUT = -1.0  # a lease that has already run out when it is taken (what a stalled owner's looks like later)


@dataclass
class Backend:
    """One store implementation under test: its connection, and how to open it again (a restart)."""

    path: Path
    db: Database

    def reopen(self) -> None:
        self.db.close()
        self.db = Database(self.path)

    def close(self) -> None:
        self.db.close()


BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.skip(reason="no PostgreSQL store yet")),
]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    assert request.param == "sqlite", request.param
    backend = Backend(tmp_path / "state.db", Database(tmp_path / "state.db"))
    try:
        yield backend
    finally:
        backend.close()


def session(store: Backend) -> str:
    return sessions.create_session(store.db, "main").id


def send(store: Backend, session_id: str, text: str, *, key: str | None = None) -> tuple[RunRow, bool]:
    new = NewRun(sender="person", profile="main", session_id=session_id, message=text, idempotency_key=key)
    return runs.record(store.db, new)


def claim(store: Backend, session_id: str, *, owner: str = OWNER, lease: float = LEASE) -> RunRow | None:
    claimed, _expired = runs.claim_next(store.db, session_id, owner=owner, lease_seconds=lease)
    return claimed


def finish(store: Backend, run: RunRow, reply: str, *, owner: str = OWNER) -> RunRow | None:
    said = [Message(role="user", content=run.message), Message(role="assistant", content=reply)]
    return runs.finish(store.db, run.id, owner=owner, state=RunState.COMPLETED, reply=reply, messages=said)


def contents(store: Backend, session_id: str) -> list[str]:
    return [m.content for m in sessions.list_messages(store.db, session_id)]


# --- an idempotency key is handled once ---------------------------------------------------------------


def test_a_second_record_under_a_key_returns_the_first_run(store: Backend) -> None:
    sid = session(store)
    first, created = send(store, sid, "hello", key="k-1")
    again, created_again = send(store, sid, "hello", key="k-1")
    assert created and not created_again
    assert again.id == first.id
    assert [r.id for r in runs.list_runs(store.db, session_id=sid)] == [first.id]


def test_a_key_is_handled_once_after_its_run_finished_and_after_a_restart(store: Backend) -> None:
    sid = session(store)
    first, _ = send(store, sid, "hello", key="k-1")
    claimed = claim(store, sid)
    assert claimed is not None and claimed.id == first.id
    assert finish(store, claimed, "hi") is not None
    store.reopen()
    again, created = send(store, sid, "hello", key="k-1")
    assert not created
    assert (again.id, again.state, again.reply) == (first.id, RunState.COMPLETED, "hi")
    assert claim(store, sid) is None  # nothing new was queued under the key
    assert contents(store, sid) == ["hello", "hi"]


def test_the_same_key_for_other_words_is_a_conflict_and_records_nothing(store: Backend) -> None:
    sid = session(store)
    first, _ = send(store, sid, "hello", key="k-1")
    with pytest.raises(Conflict, match="k-1"):
        send(store, sid, "something else", key="k-1")
    assert [r.id for r in runs.list_runs(store.db, session_id=sid)] == [first.id]


# --- a reply and its state commit together --------------------------------------------------------------


def test_finish_writes_the_state_the_reply_and_the_messages(store: Backend) -> None:
    sid = session(store)
    send(store, sid, "hello", key="k-1")
    claimed = claim(store, sid)
    assert claimed is not None
    done = finish(store, claimed, "hi")
    assert done is not None and (done.state, done.reply) == (RunState.COMPLETED, "hi")
    stored = runs.get(store.db, claimed.id)
    assert (stored.state, stored.reply) == (RunState.COMPLETED, "hi")
    assert contents(store, sid) == ["hello", "hi"]
    assert sessions.get_session(store.db, sid).message_count == 2


def test_a_finish_whose_messages_cannot_be_written_writes_nothing(store: Backend) -> None:
    sid = session(store)
    send(store, sid, "hello", key="k-1")
    claimed = claim(store, sid)
    assert claimed is not None
    unwritable = [Message(role="user", content="hello"), Message(role="assistant", content=None)]  # type: ignore[arg-type]
    with pytest.raises(StoreError):
        runs.finish(store.db, claimed.id, owner=OWNER, state=RunState.COMPLETED, reply="hi", messages=unwritable)
    store.reopen()  # what is on disk, not what the connection still holds
    stored = runs.get(store.db, claimed.id)
    assert (stored.state, stored.reply) == (RunState.RUNNING, None)
    assert contents(store, sid) == []
    assert sessions.get_session(store.db, sid).message_count == 0
    assert finish(store, stored, "hi") is not None  # its owner can still end it, once
    assert contents(store, sid) == ["hello", "hi"]


def test_a_finish_by_another_owner_writes_nothing(store: Backend) -> None:
    sid = session(store)
    send(store, sid, "hello", key="k-1")
    claimed = claim(store, sid)
    assert claimed is not None
    assert finish(store, claimed, "not mine", owner=OTHER) is None
    stored = runs.get(store.db, claimed.id)
    assert (stored.state, stored.reply) == (RunState.RUNNING, None)
    assert contents(store, sid) == []


# --- FIFO per session, one running run per session ------------------------------------------------------


def test_claims_take_a_sessions_runs_in_the_order_they_were_recorded(store: Backend) -> None:
    sid = session(store)
    recorded = [send(store, sid, f"message {n}", key=f"k-{n}")[0].id for n in range(4)]
    taken: list[str] = []
    while (claimed := claim(store, sid)) is not None:
        taken.append(claimed.id)
        assert finish(store, claimed, f"reply to {claimed.message}") is not None
    assert taken == recorded
    assert contents(store, sid)[::2] == [f"message {n}" for n in range(4)]


def test_no_second_run_of_a_session_is_claimed_while_one_runs(store: Backend) -> None:
    sid = session(store)
    send(store, sid, "first", key="k-1")
    send(store, sid, "second", key="k-2")
    running = claim(store, sid)
    assert running is not None and running.message == "first"
    assert claim(store, sid) is None
    assert claim(store, sid, owner=OTHER) is None  # whoever asks
    third, _ = runs.record(
        store.db,
        NewRun(sender="person", profile="main", session_id=sid, message="third", idempotency_key="k-3"),
        claim_for=OWNER,
    )
    assert third.state is RunState.QUEUED  # recorded behind the running one, not claimed with it
    assert runs.count_by_state(store.db, (RunState.RUNNING,))[RunState.RUNNING] == 1
    assert finish(store, running, "done") is not None
    after = claim(store, sid)
    assert after is not None and after.message == "second"


def test_a_running_run_does_not_hold_up_another_session(store: Backend) -> None:
    busy, idle = session(store), session(store)
    send(store, busy, "long turn", key="k-1")
    send(store, idle, "quick one", key="k-2")
    assert claim(store, busy) is not None
    other = claim(store, idle)
    assert other is not None and other.session_id == idle


# --- reclaim after a crash ---------------------------------------------------------------------------


def test_a_dead_owners_run_is_requeued_once_and_claimed_again_as_the_same_run(store: Backend) -> None:
    sid = session(store)
    first, _ = send(store, sid, "hello", key="k-1")
    claimed = claim(store, sid, owner="gateway-dead")
    assert claimed is not None
    store.reopen()  # the crash: the next gateway opens the store
    changed = runs.reclaim(store.db, is_dead=lambda owner: owner == "gateway-dead", max_attempts=3)
    assert [(r.id, r.state) for r in changed] == [(first.id, RunState.QUEUED)]
    assert runs.reclaim(store.db, is_dead=lambda owner: owner == "gateway-dead", max_attempts=3) == []
    again = claim(store, sid, owner=OTHER)
    assert again is not None and (again.id, again.attempts) == (first.id, 2)
    assert runs.reclaim(store.db, is_dead=lambda owner: owner == "gateway-dead", max_attempts=3) == []
    assert finish(store, claimed, "late", owner="gateway-dead") is None  # the old owner's late reply is refused
    assert finish(store, again, "hi", owner=OTHER) is not None
    assert contents(store, sid) == ["hello", "hi"]
    assert [r.id for r in runs.list_runs(store.db, session_id=sid)] == [first.id]


def test_a_run_whose_lease_ran_out_is_requeued_and_one_a_live_owner_holds_is_not(store: Backend) -> None:
    stalled, held = session(store), session(store)
    lapsed, _ = send(store, stalled, "stalled", key="k-1")
    kept, _ = send(store, held, "kept", key="k-2")
    assert claim(store, stalled, lease=RAN_OUT) is not None
    assert claim(store, held) is not None
    changed = runs.reclaim(store.db, is_dead=lambda owner: False, max_attempts=3)
    assert [r.id for r in changed] == [lapsed.id]
    assert runs.get(store.db, lapsed.id).state is RunState.QUEUED
    assert runs.get(store.db, kept.id).state is RunState.RUNNING


def test_a_finished_run_is_not_reclaimed(store: Backend) -> None:
    sid = session(store)
    send(store, sid, "hello", key="k-1")
    claimed = claim(store, sid, lease=RAN_OUT)
    assert claimed is not None
    assert finish(store, claimed, "hi") is not None
    store.reopen()
    assert runs.reclaim(store.db, is_dead=lambda owner: True, max_attempts=3) == []
    stored = runs.get(store.db, claimed.id)
    assert (stored.state, stored.reply, stored.attempts) == (RunState.COMPLETED, "hi", 1)
    assert claim(store, sid) is None


def test_a_run_interrupted_max_attempts_times_fails_instead_of_running_again(store: Backend) -> None:
    sid = session(store)
    send(store, sid, "hello", key="k-1")
    for attempt in (1, 2):
        claimed = claim(store, sid, owner="gateway-dead")
        assert claimed is not None and claimed.attempts == attempt
        (back,) = runs.reclaim(store.db, is_dead=lambda owner: owner == "gateway-dead", max_attempts=2)
    assert (back.state, back.error_code) == (RunState.FAILED, "interrupted")
    assert claim(store, sid) is None
