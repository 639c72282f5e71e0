"""The Hermes API-server dialect read into typed values: the one place its answers become `Result`, `Run` and
`PeerAbout` (a peer's answers in `net.peer`, the running gateway's in the CLI alike); its run events are read by
`backchannel.events.event_of`, which reads ours.

    chat answer     hermes.peer.send_result (its `result` is the outcome), hermes.session.chat.queued
                    (a receipt, or held), hermes.session.chat.completion (the reply)
    run object      /v1/runs/{id}: status, output, error, code, session_id, queue_position
    run event       /v1/runs/{id}/events: `event`, `run_id`, `delta`, `tool`, `error`, … (`events.event_of`)
    capabilities    /v1/capabilities (and /health): platform, auth, features; Backchannel's own in `backchannel`
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import GatewayError, PeerError
from ..outcome import Consumed, GroupResult, MemberResult, Outcome, Result, Run, of_run, of_state, said_state
from ..states import RunState
from .link import PeerAbout

if TYPE_CHECKING:  # pydantic loads with the first answer read against its declared type, not with every command
    from pydantic import TypeAdapter

    from .. import dialect

SEND_RESULT = "hermes.peer.send_result"
QUEUED = "hermes.session.chat.queued"


def text(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _outcome(given: Any) -> Outcome:
    try:
        return Outcome(str(given))
    except ValueError:
        return Outcome.UNKNOWN


def _run_state(status: Any) -> str | None:
    """The envelope's delivery status as a run state: its `delivered` is the run state `completed` (the outcome
    `delivered` is the envelope's `result`), so a Hermes-dialect peer and an A2A peer say the same."""
    given = text(status)
    return "completed" if given == "delivered" else given


def consumed_of(body: Mapping[str, Any]) -> tuple[Consumed | None, bool]:
    """A run's consumed receipt as an answer gives it, and whether the answer says it at all (`consumed: null`:
    no model read the message; no `consumed`: a gateway that does not say)."""
    return Consumed.of(body.get("consumed")), "consumed" in body


def chat_result(
    body: Mapping[str, Any], *, to: str, session_id: str | None, key: str | None, consumed: str | None = None
) -> Result | None:
    """A chat answer as the message's outcome; None for a shape that is none of the dialect's. `consumed`: the
    answer's CONSUMED_HEADER, which carries the receipt beside the envelope (whose keys are fixed)."""
    sid = text(body.get("session_id")) or session_id
    replayed = bool(body.get("replayed"))
    if body.get("object") == SEND_RESULT:  # the envelope says what became of it
        outcome = _outcome(body.get("result"))
        settled_badly = outcome in (Outcome.FAILED, Outcome.REFUSED, Outcome.UNKNOWN)
        read, says = Consumed.of(consumed), consumed is not None
        return Result(
            outcome,
            to,
            run_id=text(body.get("delivery_id")),
            session_id=sid,
            state=_run_state(body.get("status")),
            reply=text(body.get("reply")),
            queue_position=integer(body.get("queue_position")),
            code=text(body.get("reason")) if settled_badly else None,
            error=text(body.get("error") or (body.get("detail") if settled_badly else None)),
            replayed=replayed,
            idempotency_key=key,
            consumed=read,
            unread=says and read is None and outcome in (Outcome.DELIVERED, Outcome.FAILED),
        )
    if body.get("object") == QUEUED:
        run = Run(
            said_state(body.get("status") or "queued"),
            run_id=text(body.get("run_id") or body.get("delivery_id")),
            session_id=sid,
            queue_position=integer(body.get("queue_position")),
            landed=text(body.get("landed")),
        )
        return of_run(to, run, replayed=replayed, key=key)
    message = body.get("message")
    if isinstance(message, dict):
        content = message.get("content")
        reply = content if isinstance(content, str) else json.dumps(content)
        read, says = consumed_of(body)
        run = Run(
            RunState.COMPLETED,
            run_id=text(body.get("run_id")),
            session_id=sid,
            output=reply,
            landed=text(body.get("landed")),
            consumed=read,
            says_consumed=says,
        )
        return of_run(to, run, replayed=replayed, key=key)
    return None


def start_result(body: Mapping[str, Any], *, to: str, session_id: str, key: str, who: str) -> Result:
    """A /v1/runs answer: a receipt with the run id (or the envelope's refusal or failure)."""
    state = str(body.get("status") or "started")
    replayed = bool(body.get("replayed"))
    if body.get("object") == SEND_RESULT and body.get("result") in (Outcome.REFUSED, Outcome.FAILED):
        return Result(
            Outcome(str(body["result"])),
            to,
            run_id=text(body.get("delivery_id")),
            session_id=session_id,
            state=state,
            code=text(body.get("reason")),
            error=text(body.get("error") or body.get("detail")) or state,
            replayed=replayed,
            idempotency_key=key,
        )
    run_id = text(body.get("run_id") or body.get("delivery_id"))
    if not run_id:
        raise PeerError(f"{who} did not return a run id")
    return Result(
        Outcome.RECEIPT,
        to,
        run_id=run_id,
        session_id=session_id,
        state=state,
        queue_position=integer(body.get("queue_position")),
        replayed=replayed,
        idempotency_key=key,
    )


def run_of(body: Mapping[str, Any], *, coded: bool = False) -> Run:
    """A run object. `coded`: a failed run that gives no code has its state as its code (a peer's run, where
    the code is all a sender may learn of why)."""
    word = str(body.get("status") or "unknown")
    state = said_state(word)
    failed = coded and of_state(state) is Outcome.FAILED
    read, says = consumed_of(body)
    return Run(
        state,
        run_id=text(body.get("run_id")),
        session_id=text(body.get("session_id")),
        output=body.get("output") if isinstance(body.get("output"), str) else None,
        error=text(body.get("error")),
        code=text(body.get("code")) or (word if failed else None),
        queue_position=integer(body.get("queue_position")),
        said=dict(body),
        question=_question_text(body.get("question")),
        consumed=read,
        says_consumed=says,
    )


def _question_text(said: Any) -> str | None:
    """The text of the question a run waits for (`question`: the object, or its text)."""
    if isinstance(said, Mapping):
        said = said.get("question")
    return said if isinstance(said, str) else None


@functools.cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    from pydantic import TypeAdapter

    return TypeAdapter(kind)


def ours(kind: Any, body: Any, what: str) -> Any:
    """A Backchannel gateway's answer read as the type the API declares for it (`dialect`); an answer of another
    shape is a GatewayError that names its first difference (a gateway of another version)."""
    from pydantic import ValidationError

    try:
        return _adapter(kind).validate_python(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the body"
        raise GatewayError(
            f"the gateway's {what} is not what this version of the CLI reads ({where}: {first['msg']}):"
            " restart the gateway"
        ) from None


def gateway_run(body: Any) -> Result:
    """A run of this home's gateway as its run routes show it (`profile`, `session_id` name its session)."""
    from .. import dialect

    run: dialect.Run = ours(dialect.Run, body, "run")
    return of_run(f"{run['profile']}/{run['session_id']}", run_of(run))


def backchannel_facts(caps: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """What a Backchannel gateway says of itself in its capabilities or /health (`version`, `gateway_id`,
    `features`, `instance`): its `backchannel` object; a gateway of an earlier version said it at the top, with
    `platform: backchannel`. None for any other gateway."""
    own = caps.get("backchannel")
    if isinstance(own, dict):
        return own
    return caps if caps.get("platform") == "backchannel" else None


def about_of(caps: Mapping[str, Any]) -> PeerAbout:
    """Capabilities (or a health answer) as what the peer says it is: a Backchannel gateway by its own facts
    (`backchannel_facts`), whatever platform it names for Hermes's clients."""
    features = caps.get("features")
    idem = features.get("runs_idempotency") if isinstance(features, dict) else None
    auth = caps.get("auth")
    own = backchannel_facts(caps)
    return PeerAbout(
        answered=bool(caps),
        platform="backchannel" if own is not None else text(caps.get("platform")),
        version=text(own.get("version")) if own is not None else text(caps.get("version")),
        gateway_id=text(own.get("gateway_id")) if own is not None else None,
        person_key=isinstance(auth, dict) and auth.get("identity") == "person",
        durable_replay=isinstance(idem, dict) and bool(idem.get("supported")) and idem.get("durable") is True,
    )


def group_result(body: Mapping[str, Any]) -> GroupResult:
    """A group send's answer (`outcome.GroupResult.to_dict`): every member's outcome, as the gateway said it."""
    members = body.get("results")
    if not isinstance(members, list):
        raise GatewayError("the gateway answered the group's message with no results")
    return GroupResult(str(body.get("to") or "group:?"), tuple(_member(m) for m in members if isinstance(m, dict)))


def _member(said: Mapping[str, Any]) -> MemberResult:
    target = str(said.get("target") or "?")
    if said.get("result") == "skipped":
        return MemberResult(target, skipped=text(said.get("why")) or "skipped")
    return MemberResult(target, result_of(said, to=target))


def result_of(said: Mapping[str, Any], *, to: str) -> Result:
    """An outcome as `Result.to_dict` gives it (with `deduplicated` when the sender says it), addressed `to`."""
    found = said.get("error")
    error: Mapping[str, Any] = found if isinstance(found, dict) else {}
    read, says = consumed_of(said)
    return Result(
        _outcome(said.get("result")),
        to,
        run_id=text(said.get("run_id")),
        session_id=text(said.get("session_id")),
        state=text(said.get("state")),
        reply=text(said.get("reply") or said.get("partial_output")),
        queue_position=integer(said.get("queue_position")),
        landed=text(said.get("landed")),
        code=text(error.get("code")),
        error=text(error.get("message")),
        replayed=bool(said.get("replayed")),
        idempotency_key=text(said.get("idempotency_key")),
        deduplicated=said.get("deduplicated") is not False,
        question=text(said.get("question")),
        consumed=read,
        unread=says and read is None,
    )
