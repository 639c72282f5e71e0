"""The person's side of the questions turns ask them (`ask_person`, issue 42): the list, one question, an answer, a
decline, and the default at expiry.

Every close goes through `RunQueue.resume`: the first answer wins (`question_closed` for any other, which changes
nothing), and the same run goes back in its session's queue, behind what the session queued while it waited; its
next turn reads the answer as the session's next message (`framing.frame_answer`).

A decline (`cancel`) resumes the run too, its turn told the person declined, rather than ending it `cancelled`:
the sender of the message is still owed an answer, and the agent, told it will get none, can still give one (say
what it can without it, or ask someone else). A person who wants the run itself ended stops it
(`backchannel runs stop RUN`: its open question is cancelled with it).

An in-turn question (a Hermes run waiting for its person's approval: `core.turn_questions`) is closed the same way,
once, but its run is still running: the turn waiting on it takes the answer, which must be one of its choices. A
decline is its default (deny), as is its expiry.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from .. import addresses
from ..errors import Conflict, Forbidden, PeerError, StoreError, UsageError
from ..records import Question, Run
from ..store import questions as questionstore
from ..store.driver import Db
from .queue.commits import commits
from .queue.queue import RunQueue

log = logging.getLogger("backchannel.questions")
SWEEP_SECONDS = 1.0  # how often the gateway looks for questions past their expiry
MAX_ANSWER_CHARS = 20_000  # an answer is read by the agent as its next message: bounded like a message
EXPIRED_BY = "expiry"  # who closed a question its time ran out on (`answered_by`)
DECLINED = "(the person declined to answer)"  # what a peer is told when our sender declines its question
# Sends our sender's answer to a peer's question to that peer (`Outbound.answer`): (question, text).
Relay = Callable[[Question, str], Awaitable[None]]


class Questions:
    """The questions of the home's runs, for the person (every surface's answer comes through here)."""

    def __init__(self, db: Db, queue: RunQueue, relay: Relay | None = None) -> None:
        self.db = db
        self.queue = queue
        self.relay = relay

    async def listed(
        self, *, state: str | None = "open", limit: int = 100, for_peer: bool | None = False
    ) -> list[Question]:
        """Questions in `state` (any when None); those past their expiry are closed first. `for_peer`: False (the
        person's list) leaves out the questions asked in runs peers sent, which those peers answer; True lists only
        those; None both."""
        if state is not None and state not in questionstore.STATES:
            raise UsageError(f"state must be one of {', '.join(questionstore.STATES)}", code="invalid_state")
        await self._expire()
        return await questionstore.listed(self.db, state=state, limit=limit, for_peer=for_peer)

    async def get(self, question_id: str) -> Question:
        await self._expire()
        return await questionstore.get(self.db, question_id)

    async def of_run(self, run_id: str) -> Question | None:
        """The question run `run_id` asked last (its open one while it waits `input_required`), if any."""
        await self._expire()
        return await questionstore.last_of(self.db, run_id)

    @commits
    async def answer(self, question_id: str, text: str, *, by: str) -> tuple[Question, Run | None]:
        """The person's answer: the question closed and its run queued again (Conflict `question_closed` when it
        was closed already)."""
        text = text.strip()
        if not text:
            raise UsageError("an answer needs some text; to decline, cancel the question", code="empty_answer")
        if len(text) > MAX_ANSWER_CHARS:
            raise UsageError(
                f"the answer has {len(text):,} characters; at most {MAX_ANSWER_CHARS:,}", code="answer_too_long"
            )
        return await self._close(question_id, "answered", text, by)

    @commits
    async def cancel(self, question_id: str, *, by: str) -> tuple[Question, Run | None]:
        """The person declines to answer: the run goes on, its turn told so (see the module's docstring)."""
        return await self._close(question_id, "cancelled", None, by)

    async def _close(self, question_id: str, state: str, answer: str | None, by: str) -> tuple[Question, Run | None]:
        await self._expire()
        asked = await questionstore.get(self.db, question_id)
        if asked.from_peer:
            return await self._relayed(asked, state, answer, by), None
        if asked.in_turn:
            closed = await questionstore.close_in_turn(
                self.db, question_id, state=state, answer=_choice(asked, answer) if answer is not None else None, by=by
            )
            return closed, await self.queue.get(asked.run_id)
        if asked.for_peer and not _same_peer(by, asked.asker):
            raise Forbidden(
                f"question {question_id!r} was asked in a run {asked.asker} sent: that peer answers it (its A2A "
                f"task's follow-up, or POST /v1/runs/{asked.run_id}/answer), not this gateway's person",
                code="question_for_peer",
            )
        run = await self.queue.resume(question_id, state=state, answer=answer, by=by)
        return await questionstore.get(self.db, question_id), run

    async def _relayed(self, asked: Question, state: str, answer: str | None, by: str) -> Question:
        """A peer's question answered (or declined) by our sender: closed here once, then sent to the peer; open
        again when the peer did not take it (PeerError raised)."""
        if self.relay is None:
            raise UsageError(f"question {asked.id!r} is a peer's: answer it where a gateway runs", code="no_relay")
        closed = await questionstore.close_relayed(self.db, asked.id, state=state, answer=answer, by=by)
        await self.db.durable()
        try:
            await self.relay(closed, answer if answer is not None else DECLINED)
        except PeerError:
            await questionstore.reopen(self.db, asked.id)
            raise
        return closed

    async def sweep(self) -> None:
        """Background job: questions past their expiry take their default (or none), their runs resumed."""
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            try:
                await self._expire()
            except StoreError as exc:
                log.warning("questions not checked for expiry this round: %s", exc.message)

    async def _expire(self) -> None:
        due = await questionstore.due(self.db, time.time())  # a read: no write when none is due
        if not due:
            return
        await self.db.writable()
        for question in due:
            try:
                if question.in_turn:  # the turn waiting on it takes the default
                    await questionstore.close_in_turn(
                        self.db, question.id, state="defaulted", answer=question.default, by=EXPIRED_BY
                    )
                    continue
                await self.queue.resume(question.id, state="defaulted", answer=question.default, by=EXPIRED_BY)
            except Conflict as exc:  # answered meanwhile (by the person, another gateway): theirs stands
                log.debug("question %s not defaulted: %s", question.id, exc)
                continue
            log.info("question %s expired unanswered: its run resumed with %s", question.id, question.default)
        await self.db.durable()


def _choice(asked: Question, answer: str) -> str:
    """The choice an answer to an in-turn question names (its case aside); UsageError `not_a_choice` for another."""
    if not asked.choices:
        return answer
    for choice in asked.choices:
        if choice.casefold() == answer.strip().casefold():
            return choice
    raise UsageError(
        f"question {asked.id!r} takes one of: {', '.join(asked.choices)} (not {answer!r})", code="not_a_choice"
    )


def _same_peer(by: str, asker: str) -> bool:
    """Whether `by` (who answers) is the peer whose run asked (`peer:NAME/...`, whatever its profile)."""
    return addresses.is_remote(by) and addresses.peer_of(by) == addresses.peer_of(asker)
