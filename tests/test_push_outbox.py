"""The A2A push outbox keeps what each notification tells, not its body: the body is built from the task when it is
delivered, and still says what the task was when the notification was owed.

A task watched by a push config leaves no more copies of its text in the store than one that is not; a
notification delivered after its task moved on tells the state it was owed for, the same bytes at every
attempt, signed; a notification queued by a Backchannel before this (its body in the outbox) is delivered
as it was, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from a2a_client import V1, rpc
from backchannel.home import config
from backchannel.store import migrations, pg_migrations
from backchannel.store import sessions as sessionstore
from backchannel.store.driver import Db
from conftest import GatewayProcess
from push_receiver import COMPLETED, Post, Receiver, pushing_gateway, pushing_home, sent_with_push

ALLOWING = {"push_allow_private": True, "push_retry_first_seconds": 0.2, "push_retry_max_seconds": 0.8}
WORKING = "TASK_STATE_WORKING"


@pytest.fixture(scope="module")
def allowing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    gw = pushing_gateway(tmp_path_factory.mktemp("outbox") / "home", **ALLOWING)
    try:
        yield gw
    finally:
        gw.kill()


def ended(posts: list[Post]) -> bool:
    return any(p.state == COMPLETED for p in posts)


def copies(root: Path, marker: str) -> int:
    """How many times `marker` is in the store: every value of every row of every table of state.db."""
    needle = marker.encode()
    found = 0
    with contextlib.closing(sqlite3.connect(config.db_path(root))) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, str):
                        found += value.encode().count(needle)
                    elif isinstance(value, bytes):
                        found += value.count(needle)
    return found


def message(text: str, message_id: str) -> dict[str, object]:
    return {"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}}


def test_a_task_watched_by_a_push_config_leaves_no_more_copies_of_its_text_in_the_store(
    allowing: GatewayProcess,
) -> None:
    plain, watched = f"plain-{uuid.uuid4().hex}", f"watched-{uuid.uuid4().hex}"
    rpc(allowing, "SendMessage", message(f"{plain} " * 50, "m-plain-copies"), headers=V1)
    with Receiver() as receiver:
        sent = sent_with_push(f"{watched} " * 50, "m-watched-copies", {"url": receiver.url})
        rpc(allowing, "SendMessage", sent, headers=V1)
        delivered = receiver.wait_for(ended)
    assert ended(delivered) and any(watched in p.body.decode() for p in delivered)  # the receiver got the reply
    assert copies(allowing.root, plain) > 0
    assert copies(allowing.root, watched) == copies(allowing.root, plain)


def test_a_notification_delivered_after_its_task_ended_tells_the_state_it_was_owed_for(
    allowing: GatewayProcess,
) -> None:
    with Receiver() as receiver:
        receiver.down = True  # every POST answered 503 until the task has ended
        push = {"url": receiver.url, "token": "tok-late"}
        task = rpc(allowing, "SendMessage", sent_with_push("/sleep 0.5\nlate", "m-late", push), headers=V1)
        assert task["result"]["task"]["status"]["state"] == COMPLETED, task
        receiver.wait_for(lambda _delivered: len(receiver.posts) >= 2)
        receiver.down = False
        delivered = receiver.wait_for(ended)
        tried = list(receiver.posts)
    states = [p.state for p in delivered if p.state]
    assert states[-1] == COMPLETED and WORKING in states, states
    (working,) = [p for p in delivered if p.state == WORKING]
    status = working.json["statusUpdate"]["status"]
    assert "message" not in status and b"late" not in working.body, working.body  # no reply: it was working
    final = delivered[-1].json["statusUpdate"]["status"]
    assert status["timestamp"] < final["timestamp"], (status, final)  # when it began working, not when it ended
    assert final["message"]["parts"] == [{"text": "default (echo): late"}]
    first = tried[0]
    assert first.status == 503 and first.id in {p.id for p in delivered}
    for post in tried:  # every attempt at a notification sent the same bytes, signed
        assert post.body == next(p.body for p in tried if p.id == post.id)
        expected = hmac.new(b"tok-late", post.body, hashlib.sha256).hexdigest()
        assert post.headers["x-a2a-signature"] == expected


# --- a notification queued before migration 0018 ------------------------------------------------------------

OLD_BODIES = (
    ("artifact:old:completed", "pn_old_artifact", '{"artifactUpdate": {"said": "queued long ago ✓"}}'.encode()),
    ("status:completed", "pn_old_status", b'{"statusUpdate": {"status": {"state": "TASK_STATE_COMPLETED"}}}'),
)


async def _old_outbox(db: Db, receiver_url: str) -> None:
    """A completed task whose config was owed two notifications (their bodies in the outbox, as a Backchannel
    before migration 0018 queued them) and was told one before."""
    session = await sessionstore.create_session(db, "default", title="old work", source="test")
    at = time.time()
    async with db.tx() as tx:
        await tx.run(
            "INSERT INTO runs (id, idempotency_key, fingerprint, sender, profile, session_id, message, state, reply,"
            " attempts, created_at, updated_at, started_at, finished_at, origin)"
            " VALUES ('run_old', 'k-old', 'f-old', 'human:a2a', 'default', ?, 'old work', 'completed', 'old reply',"
            " 1, ?, ?, ?, ?, 'run_old')",
            (session.id, at, at, at, at),
        )
        config_row = await tx.one(
            "INSERT INTO push_configs (task_id, config_id, owner, profile, url, token, version, notified, done,"
            " created_at, updated_at) VALUES ('run_old', 'old', 'human:a2a', 'default', ?, 'tok-old', '1.0',"
            " 'completed', 1, ?, ?) RETURNING seq",
            (receiver_url, at, at),
        )
        assert config_row is not None
        await tx.run(
            "INSERT INTO push_outbox (config_seq, event_key, notification_id, body, state, attempts, next_at,"
            " created_at, finished_at) VALUES (?, 'status:running', 'pn_old_told', ?, 'delivered', 1, ?, ?, ?)",
            (config_row[0], b'{"told": "before"}', at, at, at),
        )
        for key, notification, body in OLD_BODIES:
            await tx.run(
                "INSERT INTO push_outbox (config_seq, event_key, notification_id, body, state, attempts, next_at,"
                " created_at) VALUES (?, ?, ?, ?, 'pending', 2, ?, ?)",
                (config_row[0], key, notification, body, at, at),
            )


def _store_before_0018(gw: GatewayProcess, receiver_url: str, store_url: str | None) -> None:
    """The home's store made by the migrations before 0018, holding `_old_outbox`."""

    async def make() -> None:
        if store_url is None:
            from backchannel.store.db import Database

            db: Db = Database(config.db_path(gw.root))
        else:
            from backchannel.store.pg import PgDatabase

            db = PgDatabase(store_url)
        await db.open()
        try:
            await _old_outbox(db, receiver_url)
        finally:
            await db.aclose()

    lists = (migrations.MIGRATIONS, pg_migrations.MIGRATIONS)
    kept = [list(each) for each in lists]
    try:
        for each in lists:
            each[:] = [m for m in each if m[0] < "0018"]  # type: ignore[index]
        asyncio.run(make())
    finally:
        for each, was in zip(lists, kept, strict=True):
            each[:] = was  # type: ignore[index]


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_notifications_queued_before_the_outbox_kept_references_are_delivered_as_they_were(
    tmp_path: Path, request: pytest.FixtureRequest, store: str
) -> None:
    url = request.getfixturevalue("postgres_url") if store == "postgresql" else None
    gw = pushing_home(tmp_path / "home", store_url=url, **ALLOWING)
    try:
        with Receiver() as receiver:
            _store_before_0018(gw, receiver.url, url)
            gw.start()
            delivered = receiver.wait_for(lambda posts: len(posts) >= len(OLD_BODIES))
        assert [(p.id, p.body) for p in delivered] == [(n, body) for _key, n, body in OLD_BODIES], gw.log()[-3000:]
        for post in delivered:
            assert post.headers["x-a2a-signature"] == hmac.new(b"tok-old", post.body, hashlib.sha256).hexdigest()
    finally:
        gw.kill()
