"""What the store keeps, as every layer sees it: a run, a session, a ledger entry, a peer key, a push config.

One frozen type per concept, from the store to the wire: the store reads its rows into these (each in one
place), the core decides on them and the surfaces render them. A pure module below the store, so a surface
names a run without naming the store; a new field is added here, in its row reader and in its shape.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from . import keys
from .ids import BOT_CHAT_TITLE
from .outcome import Consumed, Outcome, Result, of_run, of_state, said_state
from .outcome import Run as Said
from .states import UNFINISHED, RunState

__all__ = [
    "BOT_CHAT_TITLE",
    "LedgerEntry",
    "PeerKey",
    "PushConfig",
    "Question",
    "Receiver",
    "Run",
    "RunState",
    "Session",
    "TaskQuery",
]


@dataclass(frozen=True)
class Run:
    """One run: who sent which message where, its state, its reply or error, and when. `fencing` and the
    trace fields are the queue's (a claim's token, the trace the run continues); the surfaces show the rest."""

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
    origin: str | None = None
    sender_profile: str | None = None
    sender_session: str | None = None
    wait_seconds: float | None = None
    wake: bool = False
    fencing: int = 0  # one more at each claim: the writes of a turn are refused once another claim took the run
    tokens_in: int = 0  # what its turn's model calls read, every attempt's
    tokens_out: int = 0  # and wrote
    cost_usd: float = 0.0  # and cost (the profile's model.prices)
    landed: str | None = None  # started | steered | queued: where the message went when it came (None: held)
    steered_into: str | None = None  # the running turn a steered message was given to (it ends with that turn)
    traceparent: str | None = None  # the trace the run continues: W3C context of what caused it (None: untraced)
    tracestate: str | None = None
    trace_span: str | None = None  # its own span's context (W3C traceparent), written with its end
    released_at: float | None = None  # a held run: when the person let it go
    # A run its person's answer put back in the queue: the highest run of the store then (it goes after those).
    resumed_after: int | None = None
    consumed: Consumed | None = None  # the model call that first held its message in its input (None: none yet)
    deadline: float | None = None  # when its sender stops waiting (backchannel.deadlines): seconds since the epoch

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
            "consumed": self.consumed.to_dict() if self.consumed is not None else None,
            "deadline": self.deadline,
        }

    def result(self, *, replayed: bool = False, waited: float = 0.0, queue_position: int | None = None) -> Result:
        """What became of this run, as its sender sees it (`queue_position`: the runs ahead of a queued one)."""
        said = Said(
            self.state,
            run_id=self.id,
            session_id=self.session_id,
            output=self.reply,
            error=self.error,
            code=self.error_code,
            queue_position=queue_position,
            landed=self.landed,
            consumed=self.consumed,
            says_consumed=True,
        )
        return of_run(f"{self.profile}/{self.session_id}", said, replayed=replayed, key=self.given_key, waited=waited)


@dataclass(frozen=True)
class Session:
    """One session of a profile: its title, where it came from, and how much it holds."""

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


@dataclass(frozen=True)
class Receiver:
    """Where an A2A push config's notifications go and how they are authenticated."""

    url: str
    token: str = ""  # sent as X-A2A-Notification-Token, and the key of the body's HMAC signature
    auth_scheme: str = ""  # with auth_credentials: the Authorization header, `<scheme> <credentials>`
    auth_credentials: str = ""


@dataclass(frozen=True)
class PushConfig:
    """A task's push notification config: the receiver its caller gave, and how far its notifications went."""

    task_id: str
    config_id: str
    receiver: Receiver
    seq: int = 0
    owner: str = ""  # the caller that made it
    profile: str = ""
    version: str = "1.0"  # the protocol version its caller spoke ("1.0", "0.3"): the shape its notifications take
    notified: str = ""  # the run state last turned into notifications for it
    done: bool = False  # its task's end is in the outbox
    created_at: float = 0.0


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
    kind: str = "run"  # run (a run here), refusal (refused here, nothing recorded) or peer (a message to a peer)
    tokens_in: int = 0  # a run's: what its turn's model calls read and wrote (every attempt), and cost
    tokens_out: int = 0
    cost_usd: float = 0.0
    started_at: float | None = None  # a run's turn began (a message to a peer: None)
    finished_at: float | None = None  # it ended (a message to a peer: when its outcome was last known)
    consumed: Consumed | None = None  # a run's: the model call that first held its message
    deadline: float | None = None  # a run's: when its sender stopped waiting (backchannel.deadlines)

    def to_dict(self) -> dict[str, Any]:
        """`state` as stored beside `outcome`, the word every surface uses for what became of the message."""
        return {**asdict(self), "outcome": self.outcome.value}

    @classmethod
    def of(cls, said: dict[str, Any]) -> LedgerEntry:
        """An entry as `to_dict` gave it (what the gateway's ledger answers)."""
        given = {f.name: said[f.name] for f in fields(cls) if f.name in said}
        return cls(**{**given, "consumed": Consumed.of(given.get("consumed"))})

    @property
    def read(self) -> str:
        """Whether a model read the message: `step N` of the turn that did, `no` for a run that ended unread, `-`
        for what is not known here (a run not ended, a refusal, a message to a peer)."""
        if self.consumed is not None:
            return f"step {self.consumed.step}"
        ended = self.kind == "run" and said_state(self.state) not in UNFINISHED and self.state != "denied"
        return "no" if ended else "-"

    @property
    def outcome(self) -> Outcome:
        return Outcome.REFUSED if self.state.startswith("refused:") else of_state(said_state(self.state))

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


@dataclass(frozen=True)
class PeerKey:
    """A key given to a peer or an agent, as kept (never the key itself): whom it names, what it reaches, when
    it was made, rotated, last used."""

    name: str
    profiles: tuple[str, ...]  # patterns over profile names (`*` for all)
    read: bool
    created_at: float
    rotated_at: float | None
    last_used_at: float | None
    metrics: bool = False  # may scrape GET /metrics
    acts_as: str | None = None  # an agent's key: it acts only as this profile's sessions (their tools, mentions)
    hermes_home: str | None = None  # the Hermes home whose .env holds it (`hermes connect`)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "profiles": list(self.profiles)}


@dataclass(frozen=True)
class Question:
    """A question a run's turn asked its person (`ask_person`): one durable object, answered once from any surface.
    `asker` is who the run answers (its sender), `origin` the exchange it belongs to; `state` is open, answered,
    defaulted (its default taken at expiry, or none there was) or cancelled (the person declined)."""

    id: str
    run_id: str
    profile: str
    session_id: str
    asker: str
    origin: str | None
    question: str
    choices: tuple[str, ...] | None
    default: str | None
    expires_at: float | None
    state: str
    answer: str | None
    answered_by: str | None
    answered_at: float | None
    created_at: float
    # A peer's agent asked it in a run our sender sent there (net: A2A input-required, a Backchannel peer's
    # input_required): `profile` is that peer's address, `run_id` and `session_id` the peer's, and the answer is
    # relayed to the peer (this outbound message's). None: one of our runs asked it.
    outbound_id: int | None = None
    # What closing it does: `next_turn` (ask_person: the turn ended, its run is queued again with the answer) or
    # `in_turn` (a far side's turn waits for it, as a Hermes run waits for its approval: the run is still running,
    # and that waiting turn takes the answer; `choices` are the only answers).
    kind: str = "next_turn"

    @property
    def is_open(self) -> bool:
        return self.state == "open"

    @property
    def in_turn(self) -> bool:
        return self.kind == "in_turn"

    @property
    def for_peer(self) -> bool:
        """Asked in a run a peer sent us: that peer's person answers it (A2A, its answer route), never ours. Not an
        in-turn question: that one asks about what happens on our side (a command on our Hermes host), ours to
        answer whoever sent the run."""
        return self.asker.startswith("peer:") and not self.in_turn

    @property
    def from_peer(self) -> bool:
        """A peer's agent asked it (our sender answers it; the answer goes to that peer)."""
        return self.outbound_id is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "run_id": self.run_id,
            "profile": self.profile,
            "session_id": self.session_id,
            "asker": self.asker,
            "origin": self.origin,
            "question": self.question,
            "choices": list(self.choices) if self.choices is not None else None,
            "default": self.default,
            "expires_at": self.expires_at,
            "state": self.state,
            "answer": self.answer,
            "answered_by": self.answered_by,
            "answered_at": self.answered_at,
            "created_at": self.created_at,
            "for_peer": self.for_peer,
            "from_peer": self.from_peer,
            "kind": self.kind,
        }
