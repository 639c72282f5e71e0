"""What the surfaces (HTTP API, web view, A2A, MCP, CLI) see of runs, sessions and the rest: the core's own types.

The store's rows stop at the core: each view here is made from its row in one place (`run_view`,
`session_view`, …), so a change to a table reaches this module and not the HTTP responses or the screen.
What a surface hands in is typed the same way (`SessionRef`, `TaskQuery`, `Receiver`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

from .. import keys
from ..outcome import Outcome, of_state
from ..states import RunState
from ..store import push as pushstore
from ..store import runs as runstore
from ..store.ledger import Entry
from ..store.peer_keys import PeerKey
from ..store.sessions import BOT_CHAT_TITLE, SessionRow

__all__ = [
    "BOT_CHAT_TITLE",
    "LedgerEntry",
    "PeerKeyView",
    "PushConfig",
    "Receiver",
    "RunState",
    "RunView",
    "SessionRef",
    "SessionView",
    "TaskQuery",
]


@dataclass(frozen=True)
class RunView:
    """One run as the surfaces show it: its state, reply or error, who sent it where, and when."""

    id: str
    seq: int  # its order of arrival (a page of runs ends on one)
    idempotency_key: str  # as filed (`a2a:…`, `dedup:…`); `given_key` is the one its sender gave
    sender: str
    profile: str
    session_id: str
    message: str
    hops: int
    chain: tuple[str, ...]
    state: RunState
    reply: str | None
    error: str | None
    error_code: str | None
    attempts: int
    created_at: float
    updated_at: float
    started_at: float | None
    finished_at: float | None
    expires_at: float | None
    origin: str | None
    sender_profile: str | None
    sender_session: str | None
    wait_seconds: float | None
    tokens_in: int = 0  # what its turn's model calls read (every attempt's), wrote, and cost
    tokens_out: int = 0
    cost_usd: float = 0.0
    landed: str | None = None  # started | steered | queued

    @property
    def given_key(self) -> str:
        """The idempotency key as its sender gave it (a peer's is filed under its sender)."""
        return keys.given(self.idempotency_key)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.id,
            "state": self.state.value,
            "sender": self.sender,
            "profile": self.profile,
            "session_id": self.session_id,
            "message": self.message,
            "hops": self.hops,
            "chain": list(self.chain),
            "reply": self.reply,
            "error": self.error,
            "error_code": self.error_code,
            "attempts": self.attempts,
            "idempotency_key": self.given_key,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "origin": self.origin,
            "sender_session": self.sender_session,
            "wait_seconds": self.wait_seconds,
        }


def run_view(row: runstore.RunRow) -> RunView:
    return RunView(
        id=row.id,
        seq=row.seq,
        idempotency_key=row.idempotency_key,
        sender=row.sender,
        profile=row.profile,
        session_id=row.session_id,
        message=row.message,
        hops=row.hops,
        chain=row.chain,
        state=row.state,
        reply=row.reply,
        error=row.error,
        error_code=row.error_code,
        attempts=row.attempts,
        created_at=row.created_at,
        updated_at=row.updated_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        expires_at=row.expires_at,
        origin=row.origin,
        sender_profile=row.sender_profile,
        sender_session=row.sender_session,
        wait_seconds=row.wait_seconds,
        tokens_in=row.tokens_in,
        tokens_out=row.tokens_out,
        cost_usd=row.cost_usd,
        landed=row.landed,
    )


class SessionRef(Protocol):
    """The session a message is handed in for: a view, or a row inside the core."""

    @property
    def id(self) -> str: ...
    @property
    def profile(self) -> str: ...
    @property
    def title(self) -> str | None: ...


@dataclass(frozen=True)
class SessionView:
    """One session as the surfaces show it."""

    id: str
    profile: str
    title: str | None
    source: str
    created_at: float
    updated_at: float
    message_count: int
    remote_id: str | None = None  # its id in the Hermes gateway that holds it (hermes engine), once known

    @property
    def is_bot_chat(self) -> bool:
        return self.title == BOT_CHAT_TITLE

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "profile": self.profile,
            "title": self.title,
            "source": self.source,
            "started_at": self.created_at,
            "last_active": self.updated_at,
            "message_count": self.message_count,
        }


def session_view(row: SessionRow) -> SessionView:
    return SessionView(
        id=row.id,
        profile=row.profile,
        title=row.title,
        source=row.source,
        created_at=row.created_at,
        updated_at=row.updated_at,
        message_count=row.message_count,
        remote_id=row.remote_id,
    )


@dataclass(frozen=True)
class TaskQuery:
    """Which of a caller's A2A runs in a profile to list: `sender`'s (with `sender_profiles`, also those from
    `sender/<profile>`); `after` is the (updated_at, seq) of the last one a previous page ended on; `since`
    keeps those updated at or after it."""

    profile: str
    sender: str
    sender_profiles: bool = False
    session_id: str | None = None
    states: tuple[RunState, ...] = ()
    since: float | None = None
    after: tuple[float, int] | None = None


def task_query(query: TaskQuery) -> runstore.TaskQuery:
    return runstore.TaskQuery(
        profile=query.profile,
        sender=query.sender,
        sender_profiles=query.sender_profiles,
        session_id=query.session_id,
        states=query.states,
        since=query.since,
        after=query.after,
    )


@dataclass(frozen=True)
class Receiver:
    """Where an A2A push config's notifications go and how they are authenticated."""

    url: str
    token: str = ""  # sent as X-A2A-Notification-Token, and the key of the body's HMAC signature
    auth_scheme: str = ""  # with auth_credentials: the Authorization header, `<scheme> <credentials>`
    auth_credentials: str = ""


def receiver_row(receiver: Receiver) -> pushstore.Receiver:
    return pushstore.Receiver(
        url=receiver.url,
        token=receiver.token,
        auth_scheme=receiver.auth_scheme,
        auth_credentials=receiver.auth_credentials,
    )


@dataclass(frozen=True)
class PushConfig:
    """A task's push notification config, as its caller gave it."""

    task_id: str
    config_id: str
    receiver: Receiver


def push_config(row: pushstore.PushConfigRow) -> PushConfig:
    r = row.receiver
    return PushConfig(
        task_id=row.task_id,
        config_id=row.config_id,
        receiver=Receiver(r.url, r.token, r.auth_scheme, r.auth_credentials),
    )


@dataclass(frozen=True)
class LedgerEntry:
    """One line of the ledger: a run here, a refusal here (nothing recorded) or a message to a peer."""

    at: float
    sender: str
    target: str
    state: str  # a run state, or "refused:<code>"
    hops: int
    wait_seconds: float | None
    message: str
    reply: str | None
    run_id: str | None
    reason: str | None
    origin: str | None = None  # the run of the person's message this exchange descends from
    kind: str = "run"  # run, refusal or peer
    tokens_in: int = 0  # a run's: what its turn's model calls read and wrote (every attempt), and cost
    tokens_out: int = 0
    cost_usd: float = 0.0
    started_at: float | None = None  # a run's turn began
    finished_at: float | None = None  # it ended (a message to a peer: its outcome known)

    def to_dict(self) -> dict[str, Any]:
        """`state` as stored beside `outcome`, the word every surface uses for what became of the message."""
        return {**asdict(self), "outcome": self.outcome.value}

    @property
    def outcome(self) -> Outcome:
        return Outcome.REFUSED if self.state.startswith("refused:") else of_state(self.state)

    @property
    def refusal_code(self) -> str | None:
        return self.state.partition(":")[2] if self.state.startswith("refused:") else None

    @property
    def identity(self) -> tuple[object, ...]:
        """What stays the same while the entry's state changes (a run's id; for the rest, when, who and whom)."""
        if self.kind == "run" and self.run_id:
            return (self.kind, self.run_id)
        return (self.kind, self.at, self.sender, self.target)

    @property
    def detail(self) -> str | None:
        """What the outcome word leaves out: a refusal's code, or a state that is not the plain one for its outcome
        (`cancelled` of a failed run, `running` of a receipt); None for a run that simply completed."""
        if self.refusal_code is not None:
            return self.refusal_code
        return None if self.state in ("completed", self.outcome.value) else self.state


def ledger_entry(row: Entry) -> LedgerEntry:
    return LedgerEntry(
        at=row.at,
        sender=row.sender,
        target=row.target,
        state=row.state,
        hops=row.hops,
        wait_seconds=row.wait_seconds,
        message=row.message,
        reply=row.reply,
        run_id=row.run_id,
        reason=row.reason,
        origin=row.origin,
        kind=row.kind,
        tokens_in=row.tokens_in,
        tokens_out=row.tokens_out,
        cost_usd=row.cost_usd,
        started_at=row.started_at,
        finished_at=row.finished_at,
    )


@dataclass(frozen=True)
class PeerKeyView:
    """A peer's key as the CLI lists it: whom it names, what it reaches, when it was made, rotated, last used;
    never the key itself."""

    name: str
    profiles: tuple[str, ...]  # patterns over profile names (`*` for all)
    read: bool
    created_at: float
    rotated_at: float | None
    last_used_at: float | None
    metrics: bool = False  # may scrape GET /metrics
    acts_as: str | None = None  # an agent's key: it acts only as this profile's sessions
    hermes_home: str | None = None  # the Hermes home whose .env holds it (`hermes connect`)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "profiles": list(self.profiles)}


def peer_key_view(row: PeerKey) -> PeerKeyView:
    return PeerKeyView(
        name=row.name,
        profiles=row.profiles,
        read=row.read,
        created_at=row.created_at,
        rotated_at=row.rotated_at,
        last_used_at=row.last_used_at,
        metrics=row.metrics,
        acts_as=row.acts_as,
        hermes_home=row.hermes_home,
    )
