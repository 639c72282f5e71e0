"""The gateway's HTTP bodies, declared once: what the API answers and takes (the Hermes API-server dialect and
Backchannel's own routes), as typed dictionaries.

One declaration serves three readers: the API builds its answers as these types (mypy checks every key), the
OpenAPI document is generated from them (pydantic's JSON Schema), and a client reads a gateway's answer against
them. Typed dictionaries, not models, because the dialect tells an absent key from a null one (a run without
output has no `output`; a session's `title` may be null) and Hermes's clients read that difference.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, cast

from pydantic import Field
from typing_extensions import TypedDict

from . import records
from .messages import MAX_MESSAGE_CHARS
from .outcome import Result
from .states import RunState

Text = Annotated[str, Field(min_length=1, max_length=MAX_MESSAGE_CHARS)]
Origin256 = Annotated[str, Field(max_length=256)]

# Answers


class ErrorDetail(TypedDict):
    message: str
    type: str
    code: str


class Error(TypedDict):
    """Every error the API answers, in one envelope."""

    error: ErrorDetail


class Session(TypedDict):
    id: str
    profile: str
    source: str
    title: str | None
    started_at: float
    last_active: float
    message_count: int
    ended_at: None
    hidden: bool
    archived: bool


class SessionEnvelope(TypedDict):
    object: Literal["hermes.session"]
    session: Session


class SessionList(TypedDict):
    object: Literal["list"]
    data: list[Session]
    limit: int
    offset: int
    has_more: bool


class Model(TypedDict):
    id: Annotated[str, Field(description="a profile's name")]
    object: Literal["model"]
    created: int
    owned_by: str
    permission: list[Any]
    root: str
    parent: None


class ModelList(TypedDict):
    object: Literal["list"]
    data: list[Model]


class Stopping(TypedDict):
    object: Literal["backchannel.gateway.stopping"]
    status: Literal["stopping"]
    gateway_id: str
    pid: int
    grace_seconds: float
    running_turns: int


class Usage(TypedDict):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost_usd: float


class ConsumedReceipt(TypedDict):
    """The model call that first held a message in its input (`outcome.Consumed`): the run of the turn, which of
    its model calls (1 for the first), when, and the digest of the framed text that model saw."""

    turn: str
    step: int
    at: float
    digest: str


class Run(TypedDict):
    """A run of this gateway (`/v1/runs/{id}`): `output`, `error` and `code`, `queue_position` and `landed` only
    when it has them; `consumed` the receipt of the model that read its message (null: none did, yet)."""

    object: Literal["hermes.run"]
    run_id: str
    status: RunState
    session_id: str
    profile: str
    created_at: float
    updated_at: float
    started_at: float | None
    finished_at: float | None
    attempts: int
    hops: int
    output: NotRequired[str]
    error: NotRequired[str]
    code: NotRequired[str | None]
    queue_position: NotRequired[int]
    landed: NotRequired[str]
    consumed: ConsumedReceipt | None
    deadline: NotRequired[float]  # when its sender stops waiting (seconds since the epoch), when it has one
    usage: Usage
    question: NotRequired[Question]  # input_required: the question it waits for (its sender answers it)


class HeldRun(Run):
    """A held run, with who sent it, the message and when the hold ends, for the person to decide."""

    sender: str
    message: str
    expires_at: float | None


class HeldList(TypedDict):
    object: Literal["list"]
    data: list[HeldRun]


class RunStarted(TypedDict):
    """`POST /v1/runs`: the run is accepted (a receipt)."""

    run_id: str
    status: RunState
    replayed: bool
    session_id: str
    queue_position: int | None


class Reply(TypedDict):
    role: Literal["assistant"]
    content: str


class Completion(TypedDict):
    """A chat's reply."""

    object: Literal["hermes.session.chat.completion"]
    session_id: str
    run_id: str
    message: Reply
    usage: Usage
    replayed: bool
    landed: str | None
    consumed: ConsumedReceipt | None


class Queued(TypedDict):
    """A chat's receipt: the message is kept and will be answered; do not send it again."""

    object: Literal["hermes.session.chat.queued"]
    session_id: str
    status: RunState
    delivery_id: str
    run_id: str
    queue_position: int | None
    replayed: bool
    detail: str | None
    landed: str | None


class SendResult(TypedDict):
    """`hermes.peer.send_result`, in its order: `result` is the message's outcome (`refused`: nothing was
    recorded, do not resend)."""

    object: Literal["hermes.peer.send_result"]
    result: str
    status: str
    status_detail: str | None
    send_id: str
    delivery_id: str | None
    idempotency_key: str | None
    replayed: bool
    peer: None
    profile: str
    session_id: str | None
    queue_position: int | None
    attempts: int
    queued_seconds: float
    waited_seconds: float
    busy: bool
    retryable: bool
    retry_after_seconds: None
    reply: str | None
    error: str | None
    reason: str | None
    detail: str | None
    at: int


# The person's reads of the home (the CLI's sessions, runs and ledger)


class SessionRecord(TypedDict):
    """A session as `backchannel sessions list --json` prints it (`records.Session.to_dict`)."""

    id: str
    profile: str
    title: str | None
    source: str
    started_at: float
    last_active: float
    message_count: int


class SessionRecords(TypedDict):
    object: Literal["list"]
    data: list[SessionRecord]


class ImportedSession(SessionRecord):
    """A Hermes session made addressable here: its id in the Hermes gateway, and whether it is new here."""

    hermes_id: str | None
    created: bool


class ImportedSessions(TypedDict):
    object: Literal["list"]
    data: list[ImportedSession]


class OutcomeError(TypedDict):
    code: str
    message: str


class RunRecord(TypedDict):
    """A run as `backchannel runs show --json` prints it: its outcome as its sender sees it
    (`outcome.Result.to_dict`), who sent what, and what it used."""

    result: str
    to: str
    run_id: str
    session_id: str
    state: RunState
    replayed: bool
    landed: NotRequired[str]
    consumed: NotRequired[ConsumedReceipt | None]
    reply: NotRequired[str]
    queue_position: NotRequired[int | None]
    detail: NotRequired[str]
    error: NotRequired[OutcomeError]
    partial_output: NotRequired[str]
    idempotency_key: NotRequired[str]
    profile: str
    sender: str
    message: str
    hops: int
    attempts: int
    created_at: float
    finished_at: float | None
    deadline: float | None
    tokens_in: int
    tokens_out: int
    cost_usd: float


class RunRecords(TypedDict):
    object: Literal["list"]
    data: list[RunRecord]


class MessageRun(TypedDict):
    """The run a message was filed under, by the idempotency key it was sent with (null: none is known yet)."""

    object: Literal["backchannel.message"]
    idempotency_key: str
    run_id: str | None


def session_record(row: records.Session) -> SessionRecord:
    return cast(SessionRecord, row.to_dict())


def run_record(row: records.Run, result: Result) -> RunRecord:
    """A run and its outcome so far (`Result`) as the person reads it."""
    return cast(
        RunRecord,
        {
            **result.to_dict(),
            "profile": row.profile,
            "sender": row.sender,
            "message": row.message,
            "hops": row.hops,
            "attempts": row.attempts,
            "created_at": row.created_at,
            "finished_at": row.finished_at,
            "deadline": row.deadline,
            "tokens_in": row.tokens_in,
            "tokens_out": row.tokens_out,
            "cost_usd": row.cost_usd,
        },
    )


# Answers of the home's own commands: keys, rooms, runs on peers, profiles (the person's key only)


class PeerKey(TypedDict):
    """A key given to a peer or an agent, as kept (`records.PeerKey.to_dict`): never its value."""

    name: str
    profiles: list[str]
    read: bool
    created_at: float
    rotated_at: float | None
    last_used_at: float | None
    metrics: bool
    acts_as: str | None
    hermes_home: str | None


class PeerKeyList(TypedDict):
    object: Literal["list"]
    data: list[PeerKey]


class NewKey(PeerKey):
    """A key made or given a new value, with that value (`key`): answered this once, kept nowhere."""

    key: str


class AgentKey(NewKey):
    """A profile's agent key for a Hermes home: the one its .env holds (reused), or a new value."""

    how: Literal["made", "reused", "rotated"]


class Room(TypedDict):
    name: str
    members: list[str]
    created_at: float


class RoomRound(TypedDict):
    """A round the person's message opened: `done` once every member was asked; its lines so far."""

    room: str
    round: str
    state: Literal["open", "done"]
    lines: list[dict[str, Any]]


class PeerFacts(TypedDict):
    platform: str | None
    version: str | None
    durable_replay: bool


class PeerRunStarted(TypedDict):
    """A run started on a peer: its outcome so far (`Result.to_dict`) and what the peer says it is."""

    outcome: dict[str, Any]
    about: PeerFacts


class PeerRunState(TypedDict):
    """A run on a peer: its outcome (`Result.to_dict`), and the run as the peer said it (null: it knows none)."""

    outcome: dict[str, Any]
    run: dict[str, Any] | None


class PeerProbed(TypedDict):
    """What a URL turned out to be: a platform (`a2a`: an A2A agent, at `a2a_url`), its gateway id, what to tell."""

    platform: str | None
    a2a_url: str | None
    gateway_id: str | None
    notes: list[str]


class RetiredChat(TypedDict):
    id: str
    title: str | None


class ProfileRemoved(TypedDict):
    """A profile set aside (`removed` false: only checked, with dry_run), and its Bot Chat as now titled."""

    profile: str
    removed: bool
    folder: str | None
    bot_chat: RetiredChat | None


# questions (issue 42)


class Question(TypedDict):
    """A question a run's turn asked its person (`ask_person`): open until answered once, declined (cancelled), or
    its default taken at expiry (defaulted); `records.Question.to_dict`."""

    id: str
    run_id: str
    profile: str
    session_id: str
    asker: str
    origin: str | None
    question: str
    choices: list[str] | None
    default: str | None
    expires_at: float | None
    state: Literal["open", "answered", "defaulted", "cancelled"]
    answer: str | None
    answered_by: str | None
    answered_at: float | None
    created_at: float
    for_peer: bool  # asked in a run a peer sent: that peer answers it (A2A taskId, POST /v1/runs/{id}/answer)
    from_peer: bool  # a peer's agent asked it in a run we sent: the answer is relayed to that peer
    # next_turn: its run waits `input_required`, the answer starts its next turn; in_turn: the run's turn is still
    # running, waiting on it there (a Hermes approval): one of `choices` is the answer, the default `deny`
    kind: Literal["next_turn", "in_turn"]


class QuestionList(TypedDict):
    object: Literal["list"]
    data: list[Question]


class QuestionClosed(Question):
    """A question answered or declined, and its run as it is now (queued again: the same run; still running for an
    in-turn question, whose waiting turn takes the answer); null for a peer's question (`from_peer`), whose answer
    went to that peer."""

    run: Run | None


def session_of(row: records.Session) -> Session:
    """A session as the API shows it."""
    return {
        "id": row.id,
        "profile": row.profile,
        "source": row.source,
        "title": row.title,
        "started_at": row.created_at,
        "last_active": row.updated_at,
        "message_count": row.message_count,
        "ended_at": None,
        "hidden": False,
        "archived": False,
    }


def run_of(row: records.Run, queue_position: int | None) -> Run:
    """A run as the API shows it (`queue_position`: where a queued run waits)."""
    body: Run = {
        "object": "hermes.run",
        "run_id": row.id,
        "status": row.state,
        "session_id": row.session_id,
        "profile": row.profile,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "started_at": row.started_at,
        "finished_at": row.finished_at,
        "attempts": row.attempts,
        "hops": row.hops,
        "consumed": consumed_of(row),
        "usage": usage_of(row),
    }
    if row.reply is not None:
        body["output"] = row.reply
    if row.error is not None:
        body["error"] = row.error
        body["code"] = row.error_code
    if queue_position is not None:
        body["queue_position"] = queue_position
    if row.landed is not None:
        body["landed"] = row.landed
    if row.deadline is not None:
        body["deadline"] = row.deadline
    return body


def consumed_of(row: records.Run) -> ConsumedReceipt | None:
    return cast(ConsumedReceipt, row.consumed.to_dict()) if row.consumed is not None else None


def usage_of(row: records.Run) -> Usage:
    return {
        "input_tokens": row.tokens_in,
        "output_tokens": row.tokens_out,
        "total_tokens": row.tokens_in + row.tokens_out,
        "cost_usd": row.cost_usd,
    }


# Requests


class Message(TypedDict):
    """A message to a session."""

    message: Text
    author: NotRequired[dict[str, Any]]


class MessageOnly(TypedDict):
    """A group's or a room's message: the text alone."""

    message: Text


class Send(TypedDict):
    """`POST /v1/messages`: any address of the home's (a session, a profile's Bot Chat, peer:NAME[/AGENT],
    group:NAME)."""

    to: Annotated[str, Field(min_length=1)]
    message: Text
    stream: NotRequired[bool]


class PeerMessage(TypedDict):
    message: str
    agent: NotRequired[str]


class NewSession(TypedDict, total=False):
    id: str
    title: str
    source: str


class Mentions(TypedDict):
    message: Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)]
    wait_seconds: NotRequired[Annotated[float, Field(ge=0, le=120)]]


class CallOrigin(TypedDict, total=False):
    """Where a tool call comes from: the run of a turn handed to the chat, the tag of a turn Backchannel asked
    (X-Hermes-Session-Key), the surface."""

    run_id: Origin256
    tag: Origin256
    surface: Origin256


class ToolCall(TypedDict, total=False):
    arguments: dict[str, Any]
    origin: CallOrigin


class HandoffState(TypedDict):
    state: Literal["waiting", "running", "answered", "failed", "not_a_chat"]
    reply: NotRequired[str]
    error: NotRequired[str]
    detail: NotRequired[str]


class StartRun(TypedDict):
    input: Annotated[str, Field(min_length=1)]
    session_id: NotRequired[str]


class Steer(TypedDict, total=False):
    input: str
    message: str
    text: str


class Deny(TypedDict, total=False):
    why: str


class ChatCompletions(TypedDict):
    messages: Annotated[list[dict[str, Any]], Field(min_length=1)]
    model: NotRequired[str]
    stream: NotRequired[bool]


class Responses(TypedDict):
    input: str | list[Any]
    model: NotRequired[str]
    previous_response_id: NotRequired[str]
    stream: NotRequired[bool]


# Requests of the home's own commands: keys, rooms


class NewPeerKey(TypedDict):
    name: Annotated[str, Field(min_length=1)]
    profiles: NotRequired[list[str]]
    read: NotRequired[bool]
    metrics: NotRequired[bool]


class NewAgentKey(TypedDict):
    profile: Annotated[str, Field(min_length=1)]
    hermes_home: Annotated[str, Field(min_length=1)]
    held: NotRequired[str]
    rotate: NotRequired[bool]


class PeerProbe(TypedDict):
    url: Annotated[str, Field(min_length=1)]
    key: Annotated[str, Field(min_length=8)]
    timeout_seconds: NotRequired[Annotated[float, Field(gt=0)]]


class NewRoom(TypedDict):
    name: Annotated[str, Field(min_length=1)]
    members: NotRequired[list[str]]


class Members(TypedDict):
    members: Annotated[list[str], Field(min_length=1)]


# questions (issue 42)


class QuestionAnswer(TypedDict, total=False):
    """`answer`: the person's answer; or `cancel: true`: the person declines (the run goes on without it)."""

    answer: Annotated[str, Field(min_length=1)]
    cancel: bool
