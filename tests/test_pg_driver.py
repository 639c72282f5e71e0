"""The PostgreSQL driver (store/pg.py): SQL written for sqlite3 runs as written, a transaction commits whole or
not at all, gateways starting together migrate once, errors leave as StoreError without the password, and
another gateway's announced commit moves `data_version()`.

Each test has a fresh database on the session's throwaway cluster (tests/postgres.py; skipped without
PostgreSQL, failed under BACKCHANNEL_REQUIRE_POSTGRES=1). Waits poll the condition with a deadline. The driver's
pure parts (placeholders, rowcounts, URLs without passwords) are tests/test_pg_sql.py.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from backchannel.errors import DiskFull, StoreError
from backchannel.store import pg_migrations
from backchannel.store.db import Database
from backchannel.store.driver import CHANGES_CHANNEL
from backchannel.store.meta import meta_get, meta_set_default
from backchannel.store.pg import NOTIFY_SQL, PgDatabase
from backchannel.store.pg_errors import violates_unique
from conftest import free_port
from postgres import Cluster

DEADLINE = 10.0  # seconds: what is awaited happens long before this, or never
INSERT_SESSION = "INSERT INTO sessions (id, profile, source, created_at, updated_at) VALUES (?, 'default', 'cli', ?, ?)"
INSERT_RUN = (
    "INSERT INTO runs (id, idempotency_key, fingerprint, sender, profile, session_id, message, state, created_at,"
    " updated_at) VALUES (?, ?, 'fp', 'human:cli', 'default', ?, 'hello', ?, 1.0, 1.0)"
)


@asynccontextmanager
async def opened(url: str, **options: Any) -> AsyncIterator[PgDatabase]:
    db = PgDatabase(url, **options)
    await db.open()
    try:
        yield db
    finally:
        await db.aclose()


async def until(condition: Callable[[], bool], what: str) -> None:
    """Return once `condition()` holds; fail naming `what` when it has not within DEADLINE."""
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE}s: {what}")
        await asyncio.sleep(0.01)


async def until_async(condition: Callable[[], Any], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE}s: {what}")
        await asyncio.sleep(0.01)


def with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{parts.netloc.rpartition('@')[2]}"))


def database_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


# --- statements -----------------------------------------------------------------------------------------------


def test_sql_written_for_sqlite_runs_with_its_literals_intact(postgres_url: str) -> None:
    async def scenario() -> None:
        async with opened(postgres_url) as db:
            row = await db.one("SELECT ? AS a, 'what?' AS b, 'it''s ?' AS c, ?::bigint AS d", ("x", 7))
            assert row is not None
            assert (row["a"], row["b"], row["c"], row["d"]) == ("x", "what?", "it's ?", 7)
            assert [tuple(r) for r in await db.all("SELECT * FROM (VALUES (1), (2)) v WHERE column1 >= ?", (1,))] == [
                (1,),
                (2,),
            ]

            # unlike SQLite, a placeholder whose type nothing around it says is text: an int there is refused
            with pytest.raises(StoreError, match="expected str, got int"):
                await db.one("SELECT ? AS d", (7,))

    asyncio.run(scenario())


# --- transactions ---------------------------------------------------------------------------------------------


def test_a_transaction_is_committed_and_seen_by_another_gateway_when_its_block_ends(postgres_url: str) -> None:
    async def scenario() -> None:
        async with opened(postgres_url) as db, opened(postgres_url) as other:
            async with db.tx() as tx:
                await tx.run(INSERT_SESSION, ("s1", 1.0, 1.0))
                await tx.many(INSERT_SESSION, [("s2", 1.0, 1.0), ("s3", 1.0, 1.0)])
                assert await other.one("SELECT 1 FROM sessions WHERE id = 's1'") is None  # not before the end
            assert db.commits == 1
            rows = await other.all("SELECT id FROM sessions ORDER BY id")
            assert [row["id"] for row in rows] == ["s1", "s2", "s3"]
            assert db.pending_commit() is None
            async with asyncio.timeout(1):
                await db.durable()  # nothing left to wait for
            with db.tracking() as commits:
                async with db.tx() as tx:
                    await tx.run(INSERT_SESSION, ("s4", 1.0, 1.0))
            assert commits == []
            assert db.commits == 2

    asyncio.run(scenario())


def test_a_block_that_raises_rolls_back_every_statement_of_its_transaction(postgres_url: str) -> None:
    async def scenario() -> None:
        async with opened(postgres_url, pool_size=1) as db:  # one connection: the next tx reuses it
            with pytest.raises(RuntimeError, match="changed my mind"):
                async with db.tx() as tx:
                    await tx.run(INSERT_SESSION, ("s1", 1.0, 1.0))
                    await tx.many(INSERT_SESSION, [("s2", 1.0, 1.0), ("s3", 1.0, 1.0)])
                    assert await tx.one("SELECT count(*) FROM sessions") == (3,)  # seen inside
                    raise RuntimeError("changed my mind")
            assert await db.one("SELECT count(*) FROM sessions") == (0,)
            assert db.commits == 0
            with pytest.raises(StoreError):  # a failing statement: the statements before it are undone too
                async with db.tx() as tx:
                    await tx.run(INSERT_SESSION, ("s1", 1.0, 1.0))
                    await tx.run(INSERT_SESSION, ("s1", 1.0, 1.0))
            async with db.tx() as tx:  # the connection came back clean
                await tx.run(INSERT_SESSION, ("s9", 1.0, 1.0))
            assert [row[0] for row in await db.all("SELECT id FROM sessions")] == ["s9"]

    asyncio.run(scenario())


def test_run_returns_how_many_rows_a_statement_changed(postgres_url: str) -> None:
    async def scenario() -> None:
        async with opened(postgres_url) as db, db.tx() as tx:
            assert await tx.run(INSERT_SESSION, ("s1", 1.0, 1.0)) == 1
            assert await tx.run("INSERT INTO sessions SELECT id || 'x', profile, title, source, created_at,"
                                " updated_at, message_count, remote_id FROM sessions") == 1  # fmt: skip
            assert await tx.run("INSERT INTO sessions SELECT id || 'y', profile, title, source, created_at,"
                                " updated_at, message_count, remote_id FROM sessions") == 2  # fmt: skip
            assert await tx.run("UPDATE sessions SET title = id WHERE profile = ?", ("default",)) == 4
            assert await tx.run("UPDATE sessions SET title = ? WHERE id = ?", ("t", "nobody")) == 0
            assert await tx.run("DELETE FROM sessions WHERE id LIKE 's1%'") == 4

    asyncio.run(scenario())


# --- migrations -----------------------------------------------------------------------------------------------


def test_gateways_opening_a_new_database_together_migrate_it_once(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a slow first migration holds the first opener in its transaction while the others arrive
    monkeypatch.setattr(pg_migrations, "MIGRATIONS", [("0000_slow", "SELECT pg_sleep(0.5)"), *pg_migrations.MIGRATIONS])
    names = [name for name, _ in pg_migrations.MIGRATIONS]

    async def scenario() -> None:
        dbs = [PgDatabase(postgres_url) for _ in range(3)]
        try:
            await asyncio.gather(*(db.open() for db in dbs))
            assert sorted(len(db.migrated) for db in dbs) == [0, 0, len(names)]
            rows = await dbs[0].all("SELECT name, count(*) FROM schema_migrations GROUP BY name ORDER BY name")
            assert [tuple(row) for row in rows] == [(name, 1) for name in names]
        finally:
            for db in dbs:
                await db.aclose()

    asyncio.run(scenario())


def test_migrations_wait_for_the_migration_lock(postgres_url: str) -> None:
    async def scenario() -> None:
        holder = await asyncpg.connect(postgres_url)
        try:
            await holder.execute("SELECT pg_advisory_lock($1)", pg_migrations.MIGRATION_LOCK)
            db = PgDatabase(postgres_url)
            opening = asyncio.create_task(db.open())

            async def waits_on_the_lock() -> bool:
                waiting = await holder.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
                )
                return bool(waiting) or opening.done()

            await until_async(waits_on_the_lock, "open() waits on the migration lock")
            assert not opening.done()
            assert await holder.fetchval("SELECT to_regclass('runs')") is None  # nothing migrated meanwhile
            await holder.execute("SELECT pg_advisory_unlock($1)", pg_migrations.MIGRATION_LOCK)
            async with asyncio.timeout(DEADLINE):
                await opening
            assert db.migrated == [name for name, _ in pg_migrations.MIGRATIONS]
            await db.aclose()
        finally:
            await holder.close()

    asyncio.run(scenario())


def test_a_database_written_by_a_newer_backchannel_is_refused(postgres_url: str, postgres_cluster: Cluster) -> None:
    async def scenario() -> None:
        async with opened(postgres_url) as db, db.tx() as tx:
            await tx.run("INSERT INTO schema_migrations (name, applied_at) VALUES ('0099_from_the_future', 1.0)")
        db = PgDatabase(postgres_url)
        with pytest.raises(StoreError) as caught:
            await db.open()
        message = caught.value.message
        assert "newer Backchannel" in message and "0099_from_the_future" in message and "upgrade" in message
        assert repr(db.name) in message and postgres_cluster.password not in message

    asyncio.run(scenario())
    database = database_of(postgres_url)
    left = postgres_cluster.psql(  # the refused open let its connections go
        f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{database}' AND application_name LIKE 'backchannel%'"
    )
    assert left == "0"


def test_the_schema_is_sqlites_with_what_shared_gateways_need(postgres_url: str, tmp_path: Path) -> None:
    """Every table, column (in order, its type and NOT NULL), unique key, index and foreign key of the SQLite
    schema after all its migrations has its like here, and nothing more: one contract, two schemas."""
    pg_only_tables: set[str] = set()
    pg_only_columns: dict[str, list[str]] = {}
    pg_only_indexes: set[str] = set()
    types = {"TEXT": "text", "REAL": "double precision", "INTEGER": "bigint", "BLOB": "bytea"}
    lite = Database(tmp_path / "state.db").conn

    async def scenario() -> None:
        async with opened(postgres_url) as db:
            tables = {row[0] for row in await db.all("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
            lite_tables = {row[0] for row in lite.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            assert tables == lite_tables | pg_only_tables
            for table in sorted(lite_tables):
                lite_columns = [
                    (c[1], types[c[2]], bool(c[3] or c[5])) for c in lite.execute(f"PRAGMA table_info({table})")
                ]
                extra = [c for c in pg_only_columns.get(table, []) if c not in {name for name, _, _ in lite_columns}]
                columns = await db.all(
                    "SELECT column_name, data_type, is_nullable FROM information_schema.columns"
                    " WHERE table_schema = 'public' AND table_name = ? ORDER BY ordinal_position",
                    (table,),
                )
                assert [c[0] for c in columns] == [name for name, _, _ in lite_columns] + extra, table
                assert [(c[0], c[1], c[2] == "NO") for c in columns if c[0] not in extra] == lite_columns, table
                assert await unique_keys(db, table, excluding=pg_only_indexes) == lite_unique_keys(lite, table), table
                assert await foreign_keys(db, table) == lite_foreign_keys(lite, table), table
            lite_indexes = {
                row[0]: (row[1], row[2])
                for row in lite.execute(
                    "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
                )
            }
            indexes = {
                row[0]: row[1]
                for row in await db.all("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'")
            }
            for name, (_table, sql) in lite_indexes.items():
                assert name in indexes, name
                assert (" WHERE " in sql) == (" WHERE " in indexes[name]), name  # partial where SQLite's is
                if " GLOB '" in sql:  # a prefix: LIKE 'x%' (Dialect.starts_with)
                    prefix = sql.split(" GLOB '", 1)[1].split("*'", 1)[0]
                    assert f"~~ '{prefix}%'" in indexes[name], indexes[name]
            assert set(indexes) - {f"{t}_pkey" for t in tables} - set(lite_indexes) <= pg_only_indexes | {
                i for i in indexes if i.endswith("_key")
            }

    try:
        asyncio.run(scenario())
    finally:
        lite.close()


async def unique_keys(db: PgDatabase, table: str, *, excluding: set[str]) -> set[tuple[tuple[str, ...], bool]]:
    rows = await db.all(
        "SELECT i.indexrelid::regclass::text, i.indpred IS NOT NULL, array_agg(a.attname ORDER BY k.n)"
        " FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)"
        " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
        " WHERE i.indrelid = ?::regclass AND i.indisunique GROUP BY i.indexrelid, i.indpred IS NOT NULL",
        (table,),
    )
    return {(tuple(row[2]), row[1]) for row in rows if row[0] not in excluding}


def lite_unique_keys(lite: sqlite3.Connection, table: str) -> set[tuple[tuple[str, ...], bool]]:
    keys = {
        (tuple(c[2] for c in lite.execute(f"PRAGMA index_info('{index[1]}')")), bool(index[4]))
        for index in lite.execute(f"PRAGMA index_list({table})")
        if index[2]
    }
    pk = tuple(c[1] for c in sorted(lite.execute(f"PRAGMA table_info({table})"), key=lambda c: c[5]) if c[5])
    return keys | ({(pk, False)} if pk else set())


async def foreign_keys(db: PgDatabase, table: str) -> set[tuple[str, str, str, str]]:
    rows = await db.all(
        "SELECT a.attname, r.relname, ra.attname, c.confdeltype::text FROM pg_constraint c"
        " JOIN pg_class r ON r.oid = c.confrelid"
        " JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]"
        " JOIN pg_attribute ra ON ra.attrelid = c.confrelid AND ra.attnum = c.confkey[1]"
        " WHERE c.contype = 'f' AND c.conrelid = ?::regclass",
        (table,),
    )
    return {(row[0], row[1], row[2], {"c": "CASCADE", "a": "NO ACTION"}[row[3]]) for row in rows}


def lite_foreign_keys(lite: sqlite3.Connection, table: str) -> set[tuple[str, str, str, str]]:
    return {(fk[3], fk[2], fk[4], fk[6]) for fk in lite.execute(f"PRAGMA foreign_key_list({table})")}


def test_text_is_byte_ordered_so_a_prefix_is_a_range_of_an_index(postgres_url: str) -> None:
    async def scenario() -> None:
        async with opened(postgres_url) as db:
            loose = await db.all(
                "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'"
                " AND data_type = 'text' AND collation_name IS DISTINCT FROM 'C'"
            )
            assert [tuple(row) for row in loose] == []
            async with db.tx() as tx:  # the planner's choice, on an empty table, with scans discouraged
                await tx.run("SET LOCAL enable_seqscan = off")
                plan = "\n".join(row[0] for row in await tx.all("EXPLAIN SELECT id FROM runs WHERE id LIKE 'run-ab%'"))
            assert "Index Cond: ((id >= 'run-ab'::text) AND (id < 'run-ac'::text))" in plan, plan

    asyncio.run(scenario())


# --- errors ---------------------------------------------------------------------------------------------------


def test_a_wrong_password_is_a_store_error_that_never_shows_a_password(
    postgres_url: str, postgres_cluster: Cluster
) -> None:
    wrong = "Wr0ng-" + postgres_cluster.password
    db = PgDatabase(with_password(postgres_url, wrong))
    assert wrong not in db.name and wrong not in repr(db)

    async def scenario() -> None:
        with pytest.raises(StoreError) as caught:
            await db.open()
        message = caught.value.message
        assert "refused the login" in message and repr(db.name) in message, message
        assert wrong not in message and postgres_cluster.password not in message
        assert isinstance(caught.value.__cause__, asyncpg.InvalidPasswordError)
        assert caught.value.code == "store_unavailable" and caught.value.http_status == 503

    asyncio.run(scenario())


def test_a_server_that_cannot_be_reached_is_a_store_error_saying_so(postgres_cluster: Cluster) -> None:
    url = postgres_cluster.url("nowhere").replace(f":{postgres_cluster.port}/", f":{free_port()}/")
    db = PgDatabase(url, connect_timeout=5)

    async def scenario() -> None:
        with pytest.raises(StoreError) as caught:
            await db.open()
        message = caught.value.message
        assert "cannot be reached" in message and repr(db.name) in message, message
        assert postgres_cluster.password not in message
        assert isinstance(caught.value.__cause__, OSError)

    asyncio.run(scenario())


def test_a_full_disk_on_the_server_is_disk_full_and_saves_nothing(postgres_url: str) -> None:
    async def scenario() -> None:
        async with opened(postgres_url) as db:
            with pytest.raises(DiskFull) as caught:
                async with db.tx() as tx:
                    await tx.run(INSERT_SESSION, ("s1", 1.0, 1.0))
                    # what the server answers when it cannot extend a file: SQLSTATE 53100
                    await tx.run("DO $$ BEGIN RAISE EXCEPTION 'could not extend file' USING ERRCODE = '53100'; END $$")
            assert caught.value.code == "store_full" and caught.value.http_status == 503
            assert repr(db.name) in caught.value.message and "nothing was saved" in caught.value.message
            assert isinstance(caught.value.__cause__, asyncpg.DiskFullError)
            assert await db.one("SELECT count(*) FROM sessions") == (0,)

    asyncio.run(scenario())


def test_a_second_running_run_of_a_session_is_a_unique_violation_the_claim_can_tell_apart(postgres_url: str) -> None:
    async def scenario() -> None:
        async with opened(postgres_url) as db:
            async with db.tx() as tx:
                await tx.run(INSERT_SESSION, ("s1", 1.0, 1.0))
                await tx.run(INSERT_RUN, ("r1", "k1", "s1", "running"))
                await tx.run(INSERT_RUN, ("r2", "k2", "s1", "queued"))
            with pytest.raises(StoreError) as caught:
                async with db.tx() as tx:
                    await tx.run("UPDATE runs SET state = 'running' WHERE id = ?", ("r2",))
            assert violates_unique(caught.value, "runs_one_running")
            assert violates_unique(caught.value) and not violates_unique(caught.value, "runs_id_key")
            with pytest.raises(StoreError) as other:
                await db.one("SELECT nothing FROM runs")
            assert not violates_unique(other.value)
            assert await db.one("SELECT state FROM runs WHERE id = 'r2'") == ("queued",)

    asyncio.run(scenario())


def test_waiting_too_long_for_a_pooled_connection_is_a_store_error(postgres_url: str) -> None:
    async def scenario() -> None:
        async with opened(postgres_url, pool_size=1, acquire_timeout=0.2) as db:
            async with db.tx():  # holds the only connection
                with pytest.raises(StoreError, match="none of the pool's 1 connections came free") as caught:
                    await db.one("SELECT 1")
                assert isinstance(caught.value.__cause__, TimeoutError)
            assert await db.one("SELECT 1") == (1,)

    asyncio.run(scenario())


def test_a_database_not_open_is_a_store_error(postgres_url: str) -> None:
    async def scenario() -> None:
        db = PgDatabase(postgres_url)
        with pytest.raises(StoreError, match="is not open"):
            await db.one("SELECT 1")
        await db.open()
        await db.aclose()
        with pytest.raises(StoreError, match="is not open"):
            async with db.tx():
                pass

    asyncio.run(scenario())


# --- other gateways' changes ----------------------------------------------------------------------------------


def test_data_version_moves_when_another_gateway_announces_a_commit_and_not_for_its_own(postgres_url: str) -> None:
    async def scenario() -> None:
        async with opened(postgres_url) as a, opened(postgres_url) as b:
            a_seen, b_seen = a.data_version(), b.data_version()
            async with a.tx() as tx:  # a's own announcement: b hears it, a does not count it
                await tx.run(NOTIFY_SQL, ("run-1",))
            async with b.tx() as tx:
                await tx.run(NOTIFY_SQL, ("run-2",))
            await until(lambda: a.data_version() != a_seen, "a hears b's announcement")
            await a.sync_changes()
            await b.sync_changes()
            assert (a.data_version(), b.data_version()) == (a_seen + 1, b_seen + 1)
            with pytest.raises(RuntimeError):
                async with a.tx() as tx:  # rolled back: never announced
                    await tx.run(NOTIFY_SQL, ("run-3",))
                    raise RuntimeError
            async with a.tx() as tx:  # sent once it has committed
                await tx.announce("run-4")
            await a.notices_sent()
            await b.sync_changes()
            assert b.data_version() == b_seen + 2

    asyncio.run(scenario())


def test_what_a_transaction_announces_is_sent_after_it_commits_once_each_and_never_if_it_rolls_back(
    postgres_url: str,
) -> None:
    async def scenario() -> None:
        async with opened(postgres_url) as a, opened(postgres_url) as b:
            heard: list[str] = []
            await b.hear(CHANGES_CHANNEL, heard.append)
            with pytest.raises(RuntimeError):
                async with a.tx() as tx:
                    await tx.announce("rolled-back")
                    raise RuntimeError

            async def one(n: int) -> None:
                async with a.tx() as tx:
                    await tx.run("SELECT 1")
                    await tx.announce(f"run-{n}")
                    await tx.announce(f"run-{n}")  # twice in one transaction: told once
                    assert f"run-{n}" not in heard  # nothing is told before the commit

            await asyncio.gather(*(one(n) for n in range(20)))
            await a.notices_sent()
            await until(lambda: len(heard) >= 20, "b hears every committed announcement")
            await asyncio.sleep(0.2)  # and nothing more comes
            assert sorted(heard) == sorted(f"run-{n}" for n in range(20))

    asyncio.run(scenario())


def test_sync_changes_returns_once_every_committed_announcement_is_counted(
    postgres_url: str, postgres_cluster: Cluster
) -> None:
    database = database_of(postgres_url)

    async def scenario() -> None:
        async with opened(postgres_url) as db:
            for round_ in range(5):
                seen = db.data_version()
                # committed by another process while this event loop is blocked: the notice waits unread
                postgres_cluster.psql(f"SELECT pg_notify('backchannel_changes', 'run-{round_}')", database=database)
                await db.sync_changes()
                assert db.data_version() == seen + 1, round_

    asyncio.run(scenario())


def test_the_listener_listens_again_after_its_connection_drops(postgres_url: str) -> None:
    async def scenario() -> None:
        async with opened(postgres_url) as db:
            other = await asyncpg.connect(postgres_url)
            try:
                seen = db.data_version()
                cut = await other.fetchval(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND application_name = 'backchannel-listen'"
                )
                assert cut == 1
                await until(lambda: db.data_version() != seen, "the listener notices the drop and listens again")
                seen = db.data_version()
                await other.execute("SELECT pg_notify('backchannel_changes', 'after')")
                await until(lambda: db.data_version() != seen, "a change announced after the drop is heard")
            finally:
                await other.close()

    asyncio.run(scenario())


def test_closing_lets_every_connection_go(postgres_url: str, postgres_cluster: Cluster) -> None:
    database = database_of(postgres_url)
    count = (
        f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{database}' AND application_name LIKE 'backchannel%'"
    )

    async def scenario() -> None:
        db = PgDatabase(postgres_url)
        await db.open()
        await asyncio.gather(*(db.one("SELECT pg_sleep(0.05)") for _ in range(4)))  # several pooled connections
        assert int(postgres_cluster.psql(count)) >= 2
        await db.aclose()
        await until(lambda: postgres_cluster.psql(count) == "0", "no connection of the closed database is left")

    asyncio.run(scenario())


# --- store_meta -----------------------------------------------------------------------------------------------


def test_gateways_setting_the_same_default_all_get_the_first(postgres_url: str) -> None:
    async def scenario() -> None:
        async with opened(postgres_url) as a, opened(postgres_url) as b:
            assert await meta_get(a, "gateway_id") is None
            got = await asyncio.gather(
                *(meta_set_default(db, "gateway_id", f"gw-{i}") for i, db in enumerate([a, b] * 4))
            )
            assert len(set(got)) == 1 and got[0].startswith("gw-")
            assert await meta_get(b, "gateway_id") == got[0]
            assert await meta_set_default(b, "gateway_id", "gw-late") == got[0]

    asyncio.run(scenario())
