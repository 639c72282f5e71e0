"""A2A push notification configs and their outbox: what is owed to which receiver, and how each attempt went.

A config belongs to one task (a run) and one owner (the caller that made it). `notified` is the run state
last turned into notifications for it, `done` set once its task's end is in the outbox. Each notification
is one outbox row, unique per (config, event): a state told once is never queued again, whoever notices
it and however often. Rows of one config go out in order: only the oldest pending one is due.

A row holds no body but what its run was when it was owed (`Told`: the state and its time), the body built
from the run at delivery (core/push_bodies.py); a row queued before migration 0018 still holds its body.

    pending ──POST 2xx──> delivered
       └──── failed attempts past the bound ──> failed
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..errors import Conflict, LimitReached
from ..records import PushConfig, Receiver
from ..states import RunState
from .driver import Db, Row, Tx

_CONFIG = (
    "seq, task_id, config_id, owner, profile, url, token, auth_scheme, auth_credentials, version, notified, done,"
    " created_at"
)

HOLD_SECONDS = 120.0  # a shared store: a notification taken by one gateway is left to it this long


@dataclass(frozen=True)
class Told:
    """What a notification tells of its run: the run's state and its `updated_at` when the notification was owed."""

    state: RunState
    at: float


@dataclass(frozen=True)
class Owed:
    """The oldest pending notification of one config: what to send where, and how often it was tried."""

    seq: int
    config_seq: int
    task_id: str
    owner: str  # of its config: whose slots its POST takes (core/push_slots.py)
    notification_id: str
    event_key: str
    version: str  # of its config: the shape of its body
    told: Told | None  # None: queued before migration 0018, with its `body`
    body: bytes | None
    attempts: int
    receiver: Receiver


@dataclass(frozen=True)
class Event:
    """One notification to queue: `key` unique per config (`status:running`, `artifact:<id>:completed`)."""

    key: str
    notification_id: str


def _config(row: Row) -> PushConfig:
    return PushConfig(
        seq=row["seq"],
        task_id=row["task_id"],
        config_id=row["config_id"],
        owner=row["owner"],
        profile=row["profile"],
        receiver=Receiver(row["url"], row["token"], row["auth_scheme"], row["auth_credentials"]),
        version=row["version"],
        notified=row["notified"],
        done=bool(row["done"]),
        created_at=row["created_at"],
    )


async def save(
    db: Db,
    *,
    task_id: str,
    config_id: str,
    owner: str,
    profile: str,
    receiver: Receiver,
    version: str,
    max_per_task: int,
    max_per_owner: int,
) -> PushConfig:
    """Create the config, or replace the receiver of the one with the same id (what it was told is kept).

    A new one past the task's or the owner's bound is refused (LimitReached), and nothing is written."""
    now = time.time()
    async with db.tx() as tx:
        known = await tx.one(
            "SELECT seq FROM push_configs WHERE task_id = ? AND config_id = ? AND owner = ?",
            (task_id, config_id, owner),
        )
        if known is None:
            counted = await tx.one("SELECT COUNT(*) FROM push_configs WHERE task_id = ?", (task_id,))
            on_task = int(counted[0]) if counted is not None else 0
            if on_task >= max_per_task:
                raise LimitReached(
                    f"task {task_id!r} has {on_task} push notification configs, the most a task may have"
                    " (gateway.a2a.push_max_configs_per_task): delete one first",
                    code="push_config_limit",
                )
            await require_room(tx, owner, max_per_owner=max_per_owner)
        row = await tx.one(
            "INSERT INTO push_configs (task_id, config_id, owner, profile, url, token, auth_scheme, auth_credentials,"
            " version, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (task_id, config_id) DO UPDATE SET url = excluded.url, token = excluded.token,"
            " auth_scheme = excluded.auth_scheme, auth_credentials = excluded.auth_credentials,"
            " version = excluded.version,"
            f" updated_at = excluded.updated_at WHERE push_configs.owner = excluded.owner RETURNING {_CONFIG}",
            (
                task_id,
                config_id,
                owner,
                profile,
                receiver.url,
                receiver.token,
                receiver.auth_scheme,
                receiver.auth_credentials,
                version,
                now,
                now,
            ),
        )
    if row is None:  # a task is its owner's alone: another's config id on it is never replaced
        raise Conflict(f"push notification config {config_id!r} of task {task_id!r} is not this key's", code="conflict")
    return _config(row)


async def require_room(db: Db | Tx, owner: str, *, max_per_owner: int) -> None:
    """LimitReached when `owner` holds `max_per_owner` configs on tasks not yet ended (read by `db`, or inside the
    transaction `tx`)."""
    held = await db.one("SELECT COUNT(*) FROM push_configs WHERE owner = ? AND done = 0", (owner,))
    count = int(held[0]) if held else 0
    if count >= max_per_owner:
        raise LimitReached(
            f"this key holds {count} push notification configs on tasks not yet ended, the most one key may"
            " hold (gateway.a2a.push_max_configs_per_caller): delete some, or wait for their tasks to end",
            code="push_config_limit",
        )


async def configs(db: Db, task_id: str, owner: str) -> list[PushConfig]:
    rows = await db.all(
        f"SELECT {_CONFIG} FROM push_configs WHERE task_id = ? AND owner = ? ORDER BY seq", (task_id, owner)
    )
    return [_config(r) for r in rows]


async def delete(db: Db, task_id: str, owner: str, config_id: str) -> bool:
    """Remove a config and every notification still owed for it; False when there was none."""
    async with db.tx() as tx:
        changed = await tx.run(
            "DELETE FROM push_configs WHERE task_id = ? AND owner = ? AND config_id = ?", (task_id, owner, config_id)
        )
    return changed == 1


async def watched_tasks(db: Db) -> set[str]:
    """The tasks whose configs still wait for their end."""
    return {str(r[0]) for r in await db.all("SELECT DISTINCT task_id FROM push_configs WHERE done = 0")}


async def behind(db: Db) -> list[PushConfig]:
    """Configs whose task's run has moved on from what was last turned into notifications for them."""
    rows = await db.all(
        f"SELECT {', '.join('c.' + c for c in _CONFIG.split(', '))} FROM push_configs c JOIN runs r ON r.id = c.task_id"
        " WHERE c.done = 0 AND c.notified != r.state ORDER BY c.seq"
    )
    return [_config(r) for r in rows]


async def enqueue(db: Db, config_seq: int, events: list[Event], *, told: Told) -> int:
    """Queue the notifications of a run state for one config (those already queued once are skipped) and record
    the state as told; the number queued. A config deleted meanwhile gets none."""
    now = time.time()
    queued = 0
    async with db.tx() as tx:
        if not await tx.run(
            "UPDATE push_configs SET notified = ?, done = ?, updated_at = ? WHERE seq = ?",
            (told.state.value, int(told.state.terminal), now, config_seq),
        ):
            return 0
        for event in events:
            queued += await tx.run(
                "INSERT INTO push_outbox (config_seq, event_key, notification_id, told_state, told_at, state, next_at,"
                " created_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT (config_seq, event_key) DO NOTHING",
                (config_seq, event.key, event.notification_id, told.state.value, told.at, now, now),
            )
    return queued


async def due(db: Db, *, now: float, per_owner: int) -> list[Owed]:
    """The oldest pending notification of each config where it is due now, the first due first: at most
    `per_owner` of each owner's (so one owner's backlog never hides another's)."""
    rows = await db.all(
        "SELECT seq, config_seq, task_id, owner, notification_id, event_key, version, told_state, told_at, body,"
        " attempts, url, token, auth_scheme, auth_credentials FROM (SELECT o.seq, o.config_seq, o.next_at,"
        " c.task_id, c.owner, o.notification_id, o.event_key, c.version, o.told_state, o.told_at, o.body,"
        " o.attempts, c.url, c.token, c.auth_scheme, c.auth_credentials,"
        " ROW_NUMBER() OVER (PARTITION BY c.owner ORDER BY o.next_at, o.seq) AS nth"
        " FROM push_outbox o JOIN push_configs c ON c.seq = o.config_seq"
        " WHERE o.state = 'pending' AND o.next_at <= ? AND o.seq = (SELECT MIN(p.seq) FROM push_outbox p"
        " WHERE p.config_seq = o.config_seq AND p.state = 'pending')) d"
        " WHERE nth <= ? ORDER BY next_at, seq",
        (now, per_owner),
    )
    return [
        Owed(
            seq=r["seq"],
            config_seq=r["config_seq"],
            task_id=r["task_id"],
            owner=r["owner"],
            notification_id=r["notification_id"],
            event_key=r["event_key"],
            version=r["version"],
            told=Told(RunState(r["told_state"]), r["told_at"]) if r["told_state"] else None,
            body=None if r["body"] is None else bytes(r["body"]),
            attempts=r["attempts"],
            receiver=Receiver(r["url"], r["token"], r["auth_scheme"], r["auth_credentials"]),
        )
        for r in rows
    ]


async def claim(db: Db, owed: list[Owed], *, now: float) -> list[Owed]:
    """Those of `owed` this gateway may POST now.

    On a shared store each is taken for this gateway alone: its next try moves HOLD_SECONDS on (its POST ends,
    and records its end, well before), so another gateway does not POST it at the same moment; a gateway lost
    mid-POST leaves it to the others once that time has passed."""
    if not db.dialect.row_locks or not owed:
        return owed
    async with db.tx() as tx:
        return [
            o
            for o in owed
            if await tx.run(
                "UPDATE push_outbox SET next_at = ? WHERE seq = ? AND state = 'pending' AND next_at <= ?",
                (now + HOLD_SECONDS, o.seq, now),
            )
        ]


async def next_due(db: Db, *, after: float) -> float | None:
    """When the next pending notification is due after `after` (None: none is)."""
    row = await db.one("SELECT MIN(next_at) FROM push_outbox WHERE state = 'pending' AND next_at > ?", (after,))
    return None if row is None or row[0] is None else float(row[0])


async def delivered(db: Db, seq: int, *, attempts: int) -> None:
    async with db.tx() as tx:
        await tx.run(
            "UPDATE push_outbox SET state = 'delivered', attempts = ?, finished_at = ?"
            " WHERE seq = ? AND state = 'pending'",
            (attempts, time.time(), seq),
        )


async def retry(db: Db, seq: int, *, attempts: int, at: float, error: str) -> None:
    async with db.tx() as tx:
        await tx.run(
            "UPDATE push_outbox SET attempts = ?, next_at = ?, last_error = ? WHERE seq = ? AND state = 'pending'",
            (attempts, at, error, seq),
        )


async def give_up(db: Db, seq: int, *, attempts: int, error: str) -> None:
    async with db.tx() as tx:
        await tx.run(
            "UPDATE push_outbox SET state = 'failed', attempts = ?, last_error = ?, finished_at = ?"
            " WHERE seq = ? AND state = 'pending'",
            (attempts, error, time.time(), seq),
        )


async def prune(db: Db, *, before: float) -> None:
    """Forget notifications settled before `before`, and the configs of ended tasks with nothing left owed."""
    async with db.tx() as tx:
        await tx.run("DELETE FROM push_outbox WHERE state != 'pending' AND finished_at < ?", (before,))
        await tx.run(
            "DELETE FROM push_configs WHERE done = 1 AND updated_at < ? AND NOT EXISTS"
            " (SELECT 1 FROM push_outbox o WHERE o.config_seq = push_configs.seq)",
            (before,),
        )
