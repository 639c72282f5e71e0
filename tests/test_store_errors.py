"""The store's error boundary: every sqlite3 error leaves the store as a StoreError naming the file.

Contract: STYLE.md "Boundaries" (foreign exceptions mapped by one context manager, cause attached;
"database or disk is full" is a store-full error, 503) and DESIGN.md section 2 (the store is the source
of truth: a failed write leaves nothing behind, and the database goes on working). Driven through the
store's public functions (`Database`, `sessions`, `runs`) on a fresh state.db in a temporary folder;
group commits run on a real event loop, and a waiter on a failed group must be answered, never left hanging.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from backchannel.errors import NotFound, StoreError
from backchannel.messages import Message
from backchannel.store import runs, sessions
from backchannel.store.db import Database, SqliteTx
from now import now

pytestmark = pytest.mark.sqlite  # the home's own state.db

DURABLE_WITHIN = 5.0  # seconds: a group's waiter is answered long before this, or it hangs


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "state.db")
    try:
        yield database
    finally:
        database.conn.close()  # not db.close(): some tests close it themselves or leave a failed group


def insert_session(conn: sqlite3.Connection, session_id: str) -> None:
    conn.execute(
        "INSERT INTO sessions (id, profile, title, source, created_at, updated_at)"
        " VALUES (?, 'default', NULL, 'cli', ?, ?)",
        (session_id, time.time(), time.time()),
    )


def new_run(session_id: str, key: str, message: str = "hello") -> runs.NewRun:
    return runs.NewRun(
        sender="human:cli", profile="default", session_id=session_id, message=message, idempotency_key=key
    )


def assert_store_error(exc: BaseException, db: Database, cause: type[sqlite3.Error], code: str) -> None:
    assert isinstance(exc, StoreError), repr(exc)
    assert exc.code == code and exc.http_status == 503
    assert isinstance(exc.__cause__, cause), repr(exc.__cause__)
    assert str(db.path) in exc.message, exc.message


async def durable(db: Database) -> None:
    """`db.durable()` awaited in this task (as a route does right after its writes), within a deadline."""
    async with asyncio.timeout(DURABLE_WITHIN):
        await db.durable()


def grouped(db: Database, body: Callable[[], Awaitable[None]]) -> None:
    """Run `body` on an event loop whose iterations group the store's commits."""

    async def main() -> None:
        db.group_commits(asyncio.get_running_loop())
        await body()

    asyncio.run(main())


# --- statements inside a transaction --------------------------------------------------------------


def test_a_unique_violation_inside_a_tx_is_a_store_error_and_rolls_the_tx_back(db: Database) -> None:
    now(sessions.create_session(db, "default", session_id="taken"))
    with pytest.raises(StoreError) as caught, db.sync_tx() as conn:
        insert_session(conn, "fresh")  # written first, then undone with the failing statement's tx
        insert_session(conn, "taken")
    assert_store_error(caught.value, db, sqlite3.IntegrityError, "store_unavailable")
    assert "UNIQUE" in caught.value.message
    with pytest.raises(NotFound):
        now(sessions.get_session(db, "fresh"))
    assert now(sessions.create_session(db, "default", session_id="after")).id == "after"  # not stuck in a transaction


def test_a_run_for_a_missing_session_is_a_store_error_and_records_nothing(db: Database) -> None:
    with pytest.raises(StoreError) as caught:
        now(runs.record(db, new_run("no-such-session", "k-missing")))
    assert_store_error(caught.value, db, sqlite3.IntegrityError, "store_unavailable")
    assert now(db.all("SELECT id FROM runs")) == []


def test_a_unique_violation_in_a_group_undoes_only_its_own_tx(db: Database) -> None:
    now(sessions.create_session(db, "default", session_id="taken"))

    async def body() -> None:
        kept = await sessions.create_session(db, "default", session_id="kept")  # same group, before the failure
        with pytest.raises(StoreError) as caught, db.sync_tx() as conn:
            insert_session(conn, "undone")
            insert_session(conn, "taken")
        assert_store_error(caught.value, db, sqlite3.IntegrityError, "store_unavailable")
        await durable(db)
        assert (await sessions.get_session(db, kept.id)).id == "kept"
        with pytest.raises(NotFound):
            await sessions.get_session(db, "undone")

    grouped(db, body)


# --- a full database --------------------------------------------------------------------------------


def _fill_to_the_limit(db: Database) -> None:
    """Cap the database at its current size, as a full disk would (SQLITE_FULL on the next new page)."""
    pages = now(db.one("PRAGMA page_count"))
    assert pages is not None
    db.conn.execute(f"PRAGMA max_page_count = {int(pages[0])}")


def test_a_full_database_is_store_full(db: Database) -> None:
    session = now(sessions.create_session(db, "default", title="talk"))
    _fill_to_the_limit(db)
    with pytest.raises(StoreError) as caught:
        now(runs.record(db, new_run(session.id, "k-big", "x" * 200_000)))
    assert_store_error(caught.value, db, sqlite3.OperationalError, "store_full")
    assert "full" in caught.value.message
    assert now(db.all("SELECT id FROM runs")) == []
    assert now(runs.record(db, new_run(session.id, "k-small")))[1] is True  # a write that fits still works


def test_a_full_database_in_a_group_is_store_full_and_the_group_commits(db: Database) -> None:
    session = now(sessions.create_session(db, "default", title="talk"))
    _fill_to_the_limit(db)

    async def body() -> None:
        small, _ = await runs.record(db, new_run(session.id, "k-small"))
        with pytest.raises(StoreError) as caught:
            await runs.record(db, new_run(session.id, "k-big", "x" * 200_000))
        assert_store_error(caught.value, db, sqlite3.OperationalError, "store_full")
        await durable(db)
        assert (await runs.get(db, small.id)).message == "hello"

    grouped(db, body)


# --- a failing COMMIT ---------------------------------------------------------------------------------


def _violate_at_commit(conn: sqlite3.Connection) -> None:
    """A write whose foreign key is checked only at COMMIT, which therefore fails."""
    conn.execute("PRAGMA defer_foreign_keys = ON")
    said = [Message(role="user", content="x")]
    now(sessions.append_messages(SqliteTx(conn, Path(":memory:")), "no-such-session", said, run_id=None))


def test_a_failing_commit_is_a_store_error_and_leaves_no_transaction_open(db: Database) -> None:
    with pytest.raises(StoreError) as caught, db.sync_tx() as conn:
        insert_session(conn, "lost")
        _violate_at_commit(conn)
    assert_store_error(caught.value, db, sqlite3.IntegrityError, "store_unavailable")
    assert not db.conn.in_transaction
    with pytest.raises(NotFound):
        now(sessions.get_session(db, "lost"))
    assert now(sessions.create_session(db, "default", session_id="after")).id == "after"


def test_a_failing_group_commit_answers_its_waiters_with_a_store_error(db: Database) -> None:
    async def body() -> None:
        with db.sync_tx() as conn:
            insert_session(conn, "lost")
            _violate_at_commit(conn)
        with pytest.raises(StoreError) as caught:
            await durable(db)
        assert_store_error(caught.value, db, sqlite3.IntegrityError, "store_unavailable")
        assert not db.conn.in_transaction
        # the next write starts a new group, which commits
        await sessions.create_session(db, "default", session_id="after")
        await durable(db)

    grouped(db, body)
    with pytest.raises(NotFound):
        now(sessions.get_session(db, "lost"))
    assert now(sessions.get_session(db, "after")).id == "after"


def test_a_group_commit_after_sqlite_rolled_back_on_its_own_still_answers(db: Database) -> None:
    """COMMIT can fail after SQLite has already rolled the transaction back (a full disk, an I/O error):
    a ROLLBACK then fails too ("no transaction is active"). Here the group's transaction is ended behind
    the store's back, which leaves it in that state; its waiter must get a StoreError, not wait forever."""

    async def body() -> None:
        with db.sync_tx() as conn:
            insert_session(conn, "gone")
            conn.execute("ROLLBACK")  # the group's transaction is gone ...
            conn.execute("SAVEPOINT w")  # ... and the savepoint the store releases is a transaction of its own
        assert not db.conn.in_transaction
        with pytest.raises(StoreError) as caught:
            await durable(db)
        assert_store_error(caught.value, db, sqlite3.OperationalError, "store_unavailable")
        await sessions.create_session(db, "default", session_id="after")
        await durable(db)

    grouped(db, body)
    with pytest.raises(NotFound):
        now(sessions.get_session(db, "gone"))
    assert now(sessions.get_session(db, "after")).id == "after"


# --- every entry point ------------------------------------------------------------------------------


def test_no_sqlite3_error_escapes_any_entry_point(db: Database) -> None:
    with pytest.raises(StoreError) as bad_sql:
        now(db.one("SELEC 1"))
    assert_store_error(bad_sql.value, db, sqlite3.OperationalError, "store_unavailable")
    db.close()
    calls: dict[str, Callable[[], object]] = {
        "one": lambda: now(db.one("SELECT 1")),
        "all": lambda: now(db.all("SELECT 1")),
        "data_version": db.data_version,
        "defer_checkpoints": db.defer_checkpoints,
        "tx": lambda: now(db.tx().__aenter__()),
        "sync_tx": lambda: db.sync_tx().__enter__(),
        "get_session": lambda: now(sessions.get_session(db, "x")),
        "list_sessions": lambda: now(sessions.list_sessions(db)),
    }
    for name, call in calls.items():
        with pytest.raises(StoreError) as caught:
            call()
        assert_store_error(caught.value, db, sqlite3.ProgrammingError, "store_unavailable")
        assert caught.value.__cause__ is not None, name
    db.checkpoint()  # best effort: never raises


def test_a_path_that_cannot_hold_a_database_is_a_store_error(tmp_path: Path) -> None:
    folder = tmp_path / "state.db"
    folder.mkdir()
    with pytest.raises(StoreError) as caught:
        Database(folder)
    assert str(folder) in caught.value.message
    assert isinstance(caught.value.__cause__, sqlite3.Error)
