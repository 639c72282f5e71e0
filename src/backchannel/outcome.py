"""What became of a message: one vocabulary (DESIGN section 11) and one result type that every surface renders.

    delivered   the target answered; the reply is here
    receipt     accepted and queued, running, or waiting for its person's answer (input_required): do not resend;
                the reply comes, or ask with the run id
    held        accepted, waiting for the target's person to approve
    refused     policy said no (the code says which rule): do not resend
    failed      the turn failed, was cancelled or expired: a new send is a new run
    unknown     a remote outcome cannot be known (the request may have arrived): ask again with the same key

A run's state is a `RunState` wherever it ran: a peer's words (the Hermes dialect's `started`, `interrupted`, an
A2A task's state) are mapped onto it once, at the wire (`said_state`), or onto the outcome itself where no run
state says it (`refused` by a peer's policy, `unknown`). `of_state` is the one place an outcome is computed from
a state, `of_run` the one place a `Result` is built from what a run says of itself (`Run`: a peer's, or the
running gateway's), `of_error` and `of_http_error` the one place for an error that stopped a message (or a tool
call) before it had a run.
Every tool result carries its `result`: a message's outcome, `error_body` for an error, `answered` for a
tool's answer that is no message (a list, a memory edit: the answer is here).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .errors import (
    BackchannelError,
    Conflict,
    Forbidden,
    NotFound,
    PeerOutcomeUnknown,
    PeerRefused,
    Refused,
    UsageError,
)
from .states import RunState

RECEIPT_DETAIL = "accepted and queued: do not resend. The reply comes when the run ends; ask for it with its run id."
RUNNING_DETAIL = "accepted, and its turn is running: do not resend. The reply comes when it ends; ask with its run id."
WATCHING = "watching"  # the state of a notify_when_idle asked of a busy session
WATCHING_DETAIL = "busy now: a notice comes into this session once it has nothing queued or running."
INPUT_REQUIRED_DETAIL = (
    "accepted; its turn asked its person a question and waits for the answer: do not resend. The reply comes when"
    " the run ends; ask for it with its run id."
)
HELD_DETAIL = "held for the target's person to approve: do not resend. The outcome comes when the person decides."

# The errors that refuse a request as given: sent again unchanged, it is refused again.
REFUSING = (UsageError, NotFound, Conflict, Refused, Forbidden, PeerRefused)


class Outcome(StrEnum):
    DELIVERED = "delivered"
    RECEIPT = "receipt"
    HELD = "held"
    REFUSED = "refused"
    FAILED = "failed"
    UNKNOWN = "unknown"

    @property
    def exit_code(self) -> int:
        """The CLI's exit code for this outcome (DESIGN section 8)."""
        if self in (Outcome.DELIVERED, Outcome.RECEIPT, Outcome.HELD):
            return 0
        return 2 if self is Outcome.REFUSED else 1

    @property
    def settled(self) -> bool:
        """True when nothing more will happen to the message (no reply is still coming)."""
        return self not in (Outcome.RECEIPT, Outcome.HELD, Outcome.UNKNOWN)


NOT_CONSUMED = "not consumed: no model read the message, so it may be asked again"
# A Backchannel gateway's consumed receipt beside the Hermes dialect's send_result envelope (whose 23 keys are
# fixed): the receipt's JSON, or `null` for a run that ended unread.
CONSUMED_HEADER = "X-Backchannel-Consumed"


@dataclass(frozen=True)
class Consumed:
    """The receipt that a model read the message: the run of the turn (`turn`) whose model call `step` (1 for its
    first) first held it in its input, when (`at`), and the digest of the framed text that model saw."""

    turn: str
    step: int
    at: float
    digest: str

    def to_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "step": self.step, "at": self.at, "digest": self.digest}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def of(cls, said: Any) -> Consumed | None:
        """A receipt as `to_dict` gives it (or its JSON, as stored); None for anything else."""
        if isinstance(said, str):
            try:
                said = json.loads(said)
            except ValueError:
                return None
        if not isinstance(said, Mapping):
            return None
        turn, step, at, digest = (said.get(k) for k in ("turn", "step", "at", "digest"))
        if isinstance(step, float) and step.is_integer():  # JSON numbers through protobuf's Struct (A2A) are doubles
            step = int(step)
        if not (isinstance(turn, str) and isinstance(step, int) and isinstance(at, int | float)):
            return None
        return cls(turn, step, float(at), digest if isinstance(digest, str) else "")

    @staticmethod
    def digest_of(text: str) -> str:
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


_OF_STATE = {
    RunState.HELD: Outcome.HELD,
    RunState.QUEUED: Outcome.RECEIPT,
    RunState.RUNNING: Outcome.RECEIPT,
    RunState.INPUT_REQUIRED: Outcome.RECEIPT,  # waiting for the target's person's answer: the reply still comes
    RunState.COMPLETED: Outcome.DELIVERED,
    RunState.FAILED: Outcome.FAILED,
    RunState.CANCELLED: Outcome.FAILED,
    RunState.EXPIRED: Outcome.FAILED,
    RunState.DENIED: Outcome.REFUSED,  # a held message the person refused
}
# A peer's words that are no run state of ours, as the one they mean: a Hermes run starting, being stopped or cut
# off; the envelope's `delivered` (a run that completed); a message on its way to a peer (`sending`).
_SAID = {
    "started": RunState.RUNNING,
    "stopping": RunState.RUNNING,
    "interrupted": RunState.FAILED,
    "delivered": RunState.COMPLETED,
    "sending": RunState.QUEUED,
}


def of_state(state: RunState | Outcome) -> Outcome:
    """The outcome of a run from its state alone (an outcome stands for itself)."""
    return state if isinstance(state, Outcome) else _OF_STATE[state]


def said_state(word: object) -> RunState | Outcome:
    """A state as a peer (or a ledger line) names it, in our vocabulary: a run state; else the outcome it names
    (`refused`), or `Outcome.UNKNOWN` for a word none of ours."""
    given = str(word)
    try:
        return RunState(given)
    except ValueError:
        pass
    if given in _SAID:
        return _SAID[given]
    try:
        return Outcome(given)
    except ValueError:
        return Outcome.UNKNOWN


@dataclass(frozen=True)
class Result:
    """One message's outcome as a sender sees it; HTTP shapes, tool results and the CLI render this."""

    outcome: Outcome
    to: str  # the target's address
    run_id: str | None = None
    session_id: str | None = None
    state: str | None = None  # the run's state where it ran (ours, or what the peer said)
    reply: str | None = None  # the reply; for a failed run, whatever partial output it kept
    queue_position: int | None = None
    landed: str | None = None  # started, steered (into the running turn) or queued (behind queue_position others)
    code: str | None = None  # why: a refusal or failure code
    error: str | None = None  # the reason, for a person or a model to read
    replayed: bool = False  # the same message was already accepted: this is its first run
    idempotency_key: str | None = None
    waited: float = 0.0
    # The receiver deduplicates on the key, so asking again with it never runs the message twice. False only for
    # an unknown outcome at a peer that cannot (its session must be checked before the message is sent again).
    deduplicated: bool = True
    question: str | None = None  # input_required: what the run asks (a peer's: our sender answers it)
    consumed: Consumed | None = None  # the model that read the message, once one did
    # The run ended and no model ever read its message (`consumed: null`); False also where it is not known (a
    # run not ended, a peer that does not say).
    unread: bool = False

    @property
    def consumed_word(self) -> str | None:
        """`consumed` or `not consumed` as text output says it; None where nothing is known of it."""
        if self.consumed is not None:
            return f"consumed (step {self.consumed.step} of turn {self.consumed.turn})"
        return NOT_CONSUMED if self.unread else None

    def to_dict(self) -> dict[str, Any]:
        """The compact shape for tools and the CLI's --json: only what applies to this outcome."""
        body: dict[str, Any] = {"result": self.outcome.value, "to": self.to}
        for name in ("run_id", "session_id", "state"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        body["replayed"] = self.replayed
        if self.landed is not None:
            body["landed"] = self.landed
        if self.consumed is not None or self.unread:
            body["consumed"] = self.consumed.to_dict() if self.consumed is not None else None
        if self.outcome is Outcome.DELIVERED:
            body["reply"] = self.reply or ""
        elif self.outcome in (Outcome.RECEIPT, Outcome.HELD):
            body["queue_position"] = self.queue_position
            body["detail"] = detail(self.outcome, self.state)
            if self.question is not None:
                body["question"] = self.question
        else:
            body["error"] = {"code": self.code or self.outcome.value, "message": self.error or "no detail"}
            if self.reply:
                body["partial_output"] = self.reply
        if self.idempotency_key is not None:
            body["idempotency_key"] = self.idempotency_key
        return body


@dataclass(frozen=True)
class MemberResult:
    """One member of a group send: its outcome, or why it was skipped (the sender itself)."""

    target: str
    result: Result | None = None
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.result is None:
            return {"target": self.target, "result": "skipped", "why": self.skipped or "skipped"}
        body = self.result.to_dict()
        del body["to"]
        return {"target": self.target, **body}

    @property
    def exit_code(self) -> int:
        return 0 if self.result is None else self.result.outcome.exit_code


@dataclass(frozen=True)
class GroupResult:
    """A message sent to a group: each member's outcome, in the group's order, and how many were reached (the
    reply, a receipt or a hold: accepted) of the members sent to (the sender itself skipped)."""

    group: str  # `group:NAME`
    members: tuple[MemberResult, ...]

    @property
    def reached(self) -> str:
        sent = [m.result for m in self.members if m.result is not None]
        accepted = sum(r.outcome in (Outcome.DELIVERED, Outcome.RECEIPT, Outcome.HELD) for r in sent)
        return f"{accepted}/{len(sent)}"

    @property
    def exit_code(self) -> int:
        """The highest of the members' exit codes (the one exit table)."""
        return max((m.exit_code for m in self.members), default=0)

    @property
    def outcome(self) -> Outcome:
        """The group send's one word: the outcome of the member whose exit code is the highest (delivered when
        every member that was sent to answered)."""
        sent = [m.result for m in self.members if m.result is not None]
        if not sent:
            return Outcome.REFUSED
        return max(sent, key=lambda r: (r.outcome.exit_code, r.outcome is not Outcome.DELIVERED)).outcome

    def to_dict(self) -> dict[str, Any]:
        return {
            "result": self.outcome.value,
            "to": self.group,
            "results": [m.to_dict() for m in self.members],
            "reached": self.reached,
        }


@dataclass(frozen=True)
class Run:
    """What a run says of itself, wherever it ran (a peer, the running gateway): its state in our words, what it
    produced, and (`said`) what it answered as it answered it, for display."""

    state: RunState | Outcome
    run_id: str | None = None
    session_id: str | None = None
    output: str | None = None  # the reply; for a failed run, whatever partial output it kept
    error: str | None = None
    code: str | None = None
    queue_position: int | None = None
    landed: str | None = None  # started | steered | queued: where the message went when it came
    said: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)  # shown by `peer status`
    question: str | None = None  # input_required: what it asks
    consumed: Consumed | None = None  # the model that read its message
    says_consumed: bool = False  # it says whether a model read it (ours do; a peer that does not say: unknown)

    @property
    def outcome(self) -> Outcome:
        return of_state(self.state)


def of_run(
    to: str,
    run: Run,
    *,
    replayed: bool = False,
    key: str | None = None,
    waited: float = 0.0,
) -> Result:
    """A run's outcome as its sender sees it: the one place a `Result` is built from a run. Only a refused,
    failed or unknown outcome carries the run's error and code; a delivered one always has a reply."""
    outcome = run.outcome
    bad = outcome in (Outcome.FAILED, Outcome.REFUSED, Outcome.UNKNOWN)
    reply = (run.output or "") if outcome is Outcome.DELIVERED else run.output
    return Result(
        outcome,
        to,
        run_id=run.run_id,
        session_id=run.session_id,
        state=run.state.value,
        reply=reply,
        queue_position=run.queue_position,
        landed=run.landed,
        code=run.code if bad else None,
        error=run.error if bad else None,
        replayed=replayed,
        idempotency_key=key,
        waited=waited,
        question=run.question if run.state is RunState.INPUT_REQUIRED else None,
        consumed=run.consumed,
        unread=run.says_consumed and run.consumed is None and _ended(run.state),
    )


def _ended(state: RunState | Outcome) -> bool:
    """A run that ended (its message will never be read now), as against one that waits or runs."""
    return isinstance(state, RunState) and state.terminal


def unknown(to: str, error: str, *, code: str = PeerOutcomeUnknown.code, **fields: Any) -> Result:
    """A message whose outcome cannot be known (the request may have arrived): ask again with its key."""
    return Result(Outcome.UNKNOWN, to, code=code, error=error, **fields)


def failed(to: str, code: str | None, error: str, **fields: Any) -> Result:
    """A message that went nowhere, or whose run failed before it had one to read."""
    return Result(Outcome.FAILED, to, code=code, error=error, **fields)


def detail(outcome: Outcome, state: str | None) -> str:
    """What a receipt or a hold tells its sender, in the words of the run's state (a running turn is not queued)."""
    if outcome is Outcome.HELD:
        return HELD_DETAIL
    if state == WATCHING:
        return WATCHING_DETAIL
    if state == RunState.INPUT_REQUIRED.value:
        return INPUT_REQUIRED_DETAIL
    return RUNNING_DETAIL if state == "running" else RECEIPT_DETAIL


def refused(to: str, code: str | None, reason: str, **fields: Any) -> Result:
    """A message refused by a policy (ours or the peer's): do not resend."""
    return Result(Outcome.REFUSED, to, code=code, error=reason, **fields)


def of_error(error: BackchannelError) -> Outcome:
    """What an error means for the message (or tool call) it stopped, by its class: a request that cannot succeed
    as given (a bad argument, an unknown name, a conflict, a policy: ours or a peer's) was refused; a peer's silence
    after the request may have arrived is unknown; anything else (a limit, a store, a gateway or engine down)
    failed: nothing was accepted."""
    if isinstance(error, PeerOutcomeUnknown) or error.code == PeerOutcomeUnknown.code:  # the gateway's silence too
        return Outcome.UNKNOWN
    return Outcome.REFUSED if isinstance(error, REFUSING) else Outcome.FAILED


def of_http_error(status: int) -> Outcome:
    """The same, for a client that sees only a gateway's HTTP error answer: a 4xx refused the request as given,
    but 401 (a wrong key), 424 (a run or a peer that failed) and 429 (a limit) failed; 500 and 504 may come
    after the message was accepted (unknown); any other 5xx failed, nothing was accepted."""
    if status in (401, 424, 429):
        return Outcome.FAILED
    if 400 <= status < 500:
        return Outcome.REFUSED
    return Outcome.UNKNOWN if status in (500, 504) else Outcome.FAILED


def error_body(outcome: Outcome, code: str, message: str, **details: object) -> dict[str, Any]:
    """An error as a tool result (and the CLI's --json): the outcome it means, and the error itself."""
    return {"result": outcome.value, "error": {"code": code, "message": message, **details}}


def answered(body: dict[str, Any]) -> dict[str, Any]:
    """A tool's answer that is no message's outcome (a list, a memory edit): delivered, the answer is here."""
    return {"result": Outcome.DELIVERED.value, **body}
