"""A peer's agent asks in a run we sent it (A2A input-required, a Backchannel peer's input_required): the question
is our sender's (issue 42).

Our person's (`peer dm`, `peer run`): an open question of their own in `backchannel ask list`, kept once per
question the peer asks; their answer (or decline) goes to the peer as the task's follow-up (A2A) or the run's
answer route (`POST /v1/runs/{id}/answer`), and the peer's run goes on to its reply (`peer status` shows it).
An agent's (`send_to_peer`): its wait and receipt say `input_required` with the question (one asked after the
receipt wakes the agent's session, once: `Outbound._tell_asked`), kept the same way but out of our person's list;
the agent answers it (`send_to_peer` with the run's id, `answer` here), by the same relay and rules (the first
answer wins), and the reply comes into its session as any late reply does. A question nobody answers ends with its
default at the peer's expiry, or a stop.
"""

from __future__ import annotations

import hashlib
import time

from ... import addresses
from ...errors import Conflict, PeerError
from ...outcome import Result
from ...records import Question
from ...states import RunState
from ...store import outbound as outstore
from ...store import questions as questionstore
from ...store.driver import Db
from ..questions import Questions

SETTLING_SECONDS = 30.0  # a question answered this recently, seen asked again in the same words, is the same one


def asks(result: Result) -> bool:
    return result.state == RunState.INPUT_REQUIRED.value and result.run_id is not None


async def relay(db: Db, row: outstore.Outbound, result: Result) -> tuple[Question, bool] | None:
    """The question the peer's run asks, as our sender's (once per question): our person's, or the agent's that
    sent the run, and whether it was seen now for the first time; None when the run asks none (or another kind of
    sender sent it)."""
    if not asks(result) or (row.sender_profile is None and not row.sender.startswith("human:")):
        return None
    text = result.question or "(the peer's agent asks for input)"
    assert result.run_id is not None
    closed = await questionstore.relayed_closed(db, row.id)  # the same words asked again later: a new question
    last = closed[0] if closed else None
    if last is not None and last.question == text and time.time() - (last.answered_at or 0) < SETTLING_SECONDS:
        return None  # just answered: the peer's run still shows the question it is being told the answer to
    seen = hashlib.sha256(f"{row.id}\n{result.run_id}\n{len(closed)}\n{text}".encode()).hexdigest()[:20]
    return await questionstore.relay(
        db,
        questionstore.Relayed(
            id=f"q_peer_{seen}",
            outbound_id=row.id,
            peer_address=row.target,
            remote_run_id=result.run_id,
            remote_session_id=result.session_id or row.remote_session_id,
            asker=row.sender,
            origin=row.origin,
            question=text,
        ),
    )


async def moved_on(db: Db, row: outstore.Outbound, result: Result) -> None:
    """The peer's run no longer asks (it went on without our sender's answer, or ended): its question relayed
    here, still open, is closed (`cancelled` by the peer), so no answer is sent to a run not waiting for it."""
    if asks(result) or result.run_id is None:
        return
    await questionstore.close_moved_on(db, row.id, by=addresses.head(row.target))


async def message_of(db: Db, question: Question) -> outstore.Outbound:
    """The message whose run asked a relayed question."""
    row = await outstore.by_remote_run(db, addresses.peer_of(question.profile), question.run_id)
    if row is None:
        raise PeerError(f"no message to {question.profile} started run {question.run_id!r} here", code="run_not_found")
    return row


async def answer(db: Db, questions: Questions, row: outstore.Outbound, text: str, *, by: str) -> Question:
    """An agent's answer to the question the peer's run of `row` asked it: closed once and relayed to the peer as
    our person's answer is (Conflict `question_closed` when answered already; `question_not_asked` when that run
    asked nothing of it)."""
    asked = await questionstore.relayed_last(db, row.id)
    if asked is None:
        raise Conflict(
            f"run {row.remote_run_id} on {row.target} asked you no question: send it a new message instead",
            code="question_not_asked",
        )
    closed, _ = await questions.answer(asked.id, text, by=by)
    return closed
