"""A2A push notifications: configs per task, and the job that delivers what they are owed from the outbox.

The outbox is the truth, not the events of this process: each round the job compares every watched task's
run with what its configs were last told (`store.push.behind`) and queues the difference, so a state
change this process never saw (made before a crash, or by another process) is told all the same. Each
notification is POSTed until a 2xx answer, with a doubling wait between attempts, at most
`push_max_attempts` times; a config's notifications go out one at a time, in order, each POST in a slot of
its config's owner (`push_slots.Slots`: the person's apart, the peer keys' shared fairly). A POST cut by a crash
or a stop is sent again after the restart with the same `X-A2A-Notification-Id`: at least once, as the
spec says, and the receiver can tell a repeat.

Each POST carries the config's token (`X-A2A-Notification-Token`), its authentication (`Authorization:
<scheme> <credentials>`) and, keyed on the token, `X-A2A-Signature`: the HMAC-SHA256 of the exact body in
hex. The body is the JSON of one A2A StreamResponse with sorted keys (what `PushEvents` renders), so a
receiver that signs the parsed body again the same way (json.dumps with sort_keys) gets the same bytes. The
outbox keeps what the run was when each notification was owed, not its body: the body is built at delivery,
the same bytes at every attempt (`push_bodies`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import hmac
import logging
import re
import time

from ..errors import PushFailed, StoreError, UsageError
from ..home.push_settings import PushSettings
from ..net.screening import Screen, shown_url
from ..net.webhook import Answer, Webhooks
from ..records import PushConfig, Receiver, Run
from ..store import push as pushstore
from ..store import runs as runstore
from ..store.driver import Db
from ..store.push import Event, Owed
from ..store.runs import RunState
from .push_bodies import Bodies, PushEvents, told
from .push_slots import Slots
from .queue.commits import commits

log = logging.getLogger("backchannel.push")

POLL_SECONDS = 1.0  # how often the outbox is looked at when nothing wakes the job (another process's changes)
STORE_RETRY_SECONDS = 2.0
PRUNE_SECONDS = 600.0
RETENTION_SECONDS = 86_400.0  # settled notifications (and ended tasks' configs) kept this long
# What the SDK's own sender and Hermes send; the spec's example says application/a2a+json, which the JSON parsers
# of many webhook receivers (express.json(), by default) do not read.
CONTENT_TYPE = "application/json"
TOKEN_HEADER = "X-A2A-Notification-Token"
SIGNATURE_HEADER = "X-A2A-Signature"
ID_HEADER = "X-A2A-Notification-Id"
CONFIG_ID_RE = re.compile(r"[!-.0-~]{1,128}")  # visible ASCII but '/', at most 128
SCHEME_RE = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}")  # an HTTP auth-scheme (RFC 9110 token)
MAX_SECRET_CHARS = 4096


def check_receiver(receiver: Receiver) -> Receiver:
    """A receiver's token and authentication as headers can carry them; a usage error naming the field."""
    for name, value in (("token", receiver.token), ("authentication.credentials", receiver.auth_credentials)):
        if len(value) > MAX_SECRET_CHARS or not all(" " <= c <= "~" for c in value):
            raise UsageError(
                f"the push notification config's {name} must be at most {MAX_SECRET_CHARS} visible ASCII characters",
                code="invalid_push_config",
            )
    if bool(receiver.auth_scheme) != bool(receiver.auth_credentials):
        raise UsageError(
            "the push notification config's authentication needs both a scheme (such as Bearer) and its credentials",
            code="invalid_push_config",
        )
    if receiver.auth_scheme and not SCHEME_RE.fullmatch(receiver.auth_scheme):
        raise UsageError(
            f"the push notification config's authentication.scheme {receiver.auth_scheme[:64]!r} is not an HTTP"
            " authentication scheme (such as Bearer or Basic)",
            code="invalid_push_config",
        )
    return receiver


def check_config_id(config_id: str) -> str:
    if not CONFIG_ID_RE.fullmatch(config_id):
        raise UsageError(
            f"a push notification config id must be 1-128 visible ASCII characters without '/', got {config_id[:40]!r}",
            code="invalid_push_config",
        )
    return config_id


def headers(owed: Owed, body: bytes) -> dict[str, str]:
    """The headers of one notification's POST of `body` (module docstring)."""
    sent = {"Content-Type": CONTENT_TYPE, ID_HEADER: owed.notification_id}
    receiver = owed.receiver
    if receiver.token:
        sent[TOKEN_HEADER] = receiver.token
        sent[SIGNATURE_HEADER] = hmac.new(receiver.token.encode(), body, hashlib.sha256).hexdigest()
    if receiver.auth_scheme and receiver.auth_credentials:
        sent["Authorization"] = f"{receiver.auth_scheme} {receiver.auth_credentials}"
    return sent


class Pushes:
    """The push notification configs of a home's tasks and their delivery.

    `check`, `require_room`, `watch`, `configs` and `forget` serve the A2A handler (the caller owning the
    task is checked there); `noticed` is told every run state change and wakes the job; `run` is the job.
    Without `events` (a CLI's one-off gateway) nothing is delivered here: the gateway process delivers what
    is owed."""

    def __init__(self, db: Db, settings: PushSettings, *, events: PushEvents | None) -> None:
        self.db = db
        self.settings = settings
        self.screen = Screen(settings)
        self._events = events
        self._bodies = None if events is None else Bodies(db, events, max_bytes=settings.max_body_bytes)
        self._slots = Slots(settings)
        self._webhooks = Webhooks(
            self.screen,
            timeout=settings.timeout_seconds,
            connect_timeout=settings.connect_timeout_seconds,
            max_connections=self._slots.total,
        )
        self._watched: set[str] | None = None  # known once the job has started
        self._wake = asyncio.Event()
        self._busy: dict[int, asyncio.Task[None]] = {}  # config seq -> its notification being POSTed
        # Attempts the store could not record (a full disk): kept here so a receiver is not flooded meanwhile.
        self._unsaved: dict[int, int] = {}  # delivered notifications (seq -> attempts), recorded next round
        self._not_before: dict[int, float] = {}  # failed ones (seq -> when to try again)
        self._pruned = 0.0

    @property
    def delivers(self) -> bool:
        return self._events is not None

    # --- configs (the A2A handler) ----------------------------------------------------------------

    async def check(self, receiver: Receiver) -> Receiver:
        """A receiver that may be told: its URL leads where the home allows, its headers can be sent."""
        await self.screen.check(receiver.url)
        return check_receiver(receiver)

    async def require_room(self, owner: str) -> None:
        """LimitReached when `owner` may make no new config (before a send that would make one is accepted)."""
        await pushstore.require_room(self.db, owner, max_per_owner=self.settings.max_configs_per_caller)

    @commits
    async def watch(
        self,
        run: Run,
        *,
        owner: str,
        config_id: str,
        receiver: Receiver,
        version: str = "1.0",
        checked: bool = False,
    ) -> PushConfig:
        """Tell `receiver` of `run`'s changes from now on (its state as it is now first) under `config_id`, in
        the shape of protocol `version` (`checked`: the receiver passed `check` a moment ago)."""
        if not checked:
            await self.check(receiver)
        saved = await pushstore.save(
            self.db,
            task_id=run.id,
            config_id=check_config_id(config_id),
            owner=owner,
            profile=run.profile,
            receiver=receiver,
            version=version,
            max_per_task=self.settings.max_configs_per_task,
            max_per_owner=self.settings.max_configs_per_caller,
        )
        if self._watched is not None and not saved.done:
            self._watched.add(run.id)
        self._wake.set()
        return saved

    async def configs(self, task_id: str, *, owner: str) -> list[PushConfig]:
        return [row for row in await pushstore.configs(self.db, task_id, owner)]

    @commits
    async def forget(self, task_id: str, config_id: str, *, owner: str) -> None:
        """Delete a config and what is still owed to it; deleting one that is gone changes nothing."""
        await pushstore.delete(self.db, task_id, owner, config_id)

    def noticed(self, run: Run, state: RunState) -> None:
        """A run entered `state` (the run queue's report): wake the job when a config watches it."""
        if self._watched is not None and run.id in self._watched:
            self._wake.set()

    # --- the job -----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Deliver what is owed, round after round, until cancelled (the gateway's stop)."""
        try:
            while True:
                self._wake.clear()
                pause = await self._round()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=pause)
        finally:
            for task in self._busy.values():
                task.cancel()
            await asyncio.gather(*self._busy.values(), return_exceptions=True)
            await self._webhooks.aclose()

    async def _round(self) -> float:
        """One look at the outbox: queue what the runs' changes owe, start the POSTs that are due; the pause
        until the next round. What was due and not started waits for a slot: the end of a POST wakes the job,
        so the pause runs only to the next notification due later."""
        try:
            if self._watched is None:
                self._watched = await pushstore.watched_tasks(self.db)
            for seq, attempts in list(self._unsaved.items()):
                await self.db.writable()
                await pushstore.delivered(self.db, seq, attempts=attempts)
                await self.db.durable()
                del self._unsaved[seq]
            await self._catch_up()
            looked = await self._start_due()
            now = time.time()
            if now - self._pruned > PRUNE_SECONDS:
                self._pruned = now
                await self.db.writable()
                await pushstore.prune(self.db, before=now - RETENTION_SECONDS)
                await self.db.durable()
            due = await pushstore.next_due(self.db, after=looked)
        except StoreError as exc:
            log.warning("push notifications not looked at this round: %s", exc.message)
            return STORE_RETRY_SECONDS
        except Exception:  # a bug: logged; the job goes on (what is owed stays in the outbox)
            log.exception("push notifications not looked at this round")
            return STORE_RETRY_SECONDS
        later = [t for t in (due, *self._not_before.values()) if t is not None and t > looked]
        if not later:
            return POLL_SECONDS
        return min(max(min(later) - time.time(), 0.01), POLL_SECONDS)

    async def _catch_up(self) -> None:
        """Queue, for every config behind its run, the notifications of the run's state as it is now."""
        assert self._events is not None and self._watched is not None
        runs: dict[str, Run] = {}
        keys: dict[tuple[str, str], list[str]] = {}  # the events a run's state makes (bodies: built at delivery)
        for config in await pushstore.behind(self.db):
            run = runs.get(config.task_id)
            if run is None:
                run = runs[config.task_id] = await runstore.get(self.db, config.task_id)
            shape = (run.id, config.version)
            if shape not in keys:
                made = self._events.events(run, version=config.version, max_bytes=self.settings.max_body_bytes)
                keys[shape] = [key for key, _body in made]
            await self.db.writable()
            queued = await pushstore.enqueue(
                self.db, config.seq, [Event(key, notification_id(config, key)) for key in keys[shape]], told=told(run)
            )
            await self.db.durable()  # told only once its queueing is on disk, with the state it tells
            if queued:
                log.info(
                    "push: task %s %s, %d notification(s) owed to config %r",
                    run.id,
                    run.state,
                    queued,
                    config.config_id,
                )
        self._watched = await pushstore.watched_tasks(self.db)

    async def _start_due(self) -> float:
        """Start the POSTs that are due, as many as their owners' slots have room for; the time it looked at."""
        now = time.time()
        if len(self._busy) >= self._slots.total:
            return now
        due = [
            owed
            for owed in await pushstore.due(self.db, now=now, per_owner=self._slots.per_owner)
            if owed.seq not in self._unsaved and self._not_before.get(owed.seq, 0.0) <= now
        ]
        for owed in await pushstore.claim(self.db, self._slots.pick(due), now=now):
            self._not_before.pop(owed.seq, None)
            self._slots.hold(owed)
            task = asyncio.create_task(self._deliver(owed))
            self._busy[owed.config_seq] = task
            task.add_done_callback(functools.partial(self._done, owed.config_seq))
        return now

    def _done(self, config_seq: int, _task: asyncio.Task[None]) -> None:
        self._busy.pop(config_seq, None)
        self._slots.release(config_seq)
        self._wake.set()

    async def _deliver(self, owed: Owed) -> None:
        """POST one notification and record how it went: delivered, due again later, or given up."""
        attempt = owed.attempts + 1
        where = shown_url(owed.receiver.url)
        wait: float | None = None
        delay = 0.0
        unsendable = False
        try:
            assert self._bodies is not None
            body = await self._bodies.body(owed)
            if body is None:
                unsendable = True
                error: str | None = "its run no longer makes this notification (a new push_max_body_bytes?)"
            else:
                answer = await self._webhooks.post(owed.receiver.url, body, headers(owed, body))
                error = None if answer.ok else _refusal(answer)
                wait = answer.retry_after
        except PushFailed as exc:
            error = exc.message
        except StoreError as exc:  # its run not read: tried again like a failed POST
            error = f"its task could not be read: {exc.message}"
        except Exception as exc:  # a bug: logged, and the notification tried again like any failure
            log.exception("push %s of task %s: the POST failed unexpectedly", owed.notification_id, owed.task_id)
            error = f"an unexpected {type(exc).__name__}"
        try:
            await self.db.writable()
            if error is None:
                await pushstore.delivered(self.db, owed.seq, attempts=attempt)
                log.info(
                    "push %s of task %s delivered to %s (attempt %d)",
                    owed.notification_id,
                    owed.task_id,
                    where,
                    attempt,
                )
            elif unsendable or attempt >= self.settings.max_attempts:
                await pushstore.give_up(self.db, owed.seq, attempts=attempt, error=error)
                log.warning(
                    "push %s of task %s to %s given up after %d attempts: %s",
                    owed.notification_id,
                    owed.task_id,
                    where,
                    attempt,
                    error,
                )
            else:
                delay = max(self.settings.retry_delay(attempt), wait or 0.0)
                await pushstore.retry(self.db, owed.seq, attempts=attempt, at=time.time() + delay, error=error)
                log.info(
                    "push %s of task %s to %s: attempt %d failed (%s); next attempt in %gs",
                    owed.notification_id,
                    owed.task_id,
                    where,
                    attempt,
                    error,
                    delay,
                )
            await self.db.durable()
        except StoreError as exc:  # kept in memory until the store takes it (a restart: POSTed again, same id)
            if error is None:
                self._unsaved[owed.seq] = attempt
            else:
                self._not_before[owed.seq] = time.time() + max(delay, STORE_RETRY_SECONDS)
            log.warning(
                "push %s of task %s: its attempt could not be recorded: %s",
                owed.notification_id,
                owed.task_id,
                exc.message,
            )


def _refusal(answer: Answer) -> str:
    """A receiver's non-2xx answer, in a line: its status and the start of what it said."""
    said = f": {answer.detail[:200]}" if answer.detail else ""
    return f"HTTP {answer.status}{said}"


def notification_id(config: PushConfig, key: str) -> str:
    """The id a receiver deduplicates on: the same for every attempt at one notification, across restarts."""
    seed = f"{config.task_id}\0{config.config_id}\0{config.created_at!r}\0{key}".encode()
    return "pn_" + hashlib.sha256(seed).hexdigest()[:32]
