"""The person's side of the questions turns ask them (`ask_person`, issue 42): the list, one question, an answer, a
decline, and the default at expiry.

Every close goes through `RunQueue.resume`: the first answer wins (`question_closed` for any other, which changes
nothing), and the same run goes back in its session's queue, behind what the session queued while it waited; its
next turn reads the answer as the session's next message (`framing.frame_answer`).

A decline (`cancel`) resumes the run too, its turn told the person declined, rather than ending it `cancelled`:
the sender of the message is still owed an answer, and the agent, told it will get none, can still give one (say
what it can without it, or ask someone else). A person who wants the run itself ended stops it
(`backchannel runs stop RUN`: its open question is cancelled with it).
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..errors import Conflict, StoreError, UsageError
from ..records import Question, Run
from ..store import questions as questionstore
from ..store.driver import Db
from .queue.commits import commits
from .queue.queue import RunQueue

log = logging.getLogger("backchannel.questions")
SWEEP_SECONDS = 1.0  # how often the gateway looks for questions past their expiry
MAX_ANSWER_CHARS = 20_000  # an answer is read by the agent as its next message: bounded like a message
EXPIRED_BY = "expiry"  # who closed a question its time ran out on (`answered_by`)


class Questions:
    """The questions of the home's runs, for the person (every surface's answer comes through here)."""

    def __init__(self, db: Db, queue: RunQueue) -> None:
        self.db = db
        self.queue = queue

    async def listed(self, *, state: str | None = "open", limit: int = 100) -> list[Question]:
        """Questions in `state` (any when None); those past their expiry are closed first."""
        if state is not None and state not in questionstore.STATES:
            raise UsageError(f"state must be one of {', '.join(questionstore.STATES)}", code="invalid_state")
        await self._expire()
        return await questionstore.listed(self.db, state=state, limit=limit)

    async def get(self, question_id: str) -> Question:
        await self._expire()
        return await questionstore.get(self.db, question_id)

    async def of_run(self, run_id: str) -> Question | None:
        """The question run `run_id` asked last (its open one while it waits `input_required`), if any."""
        await self._expire()
        return await questionstore.last_of(self.db, run_id)

    @commits
    async def answer(self, question_id: str, text: str, *, by: str) -> tuple[Question, Run]:
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
    async def cancel(self, question_id: str, *, by: str) -> tuple[Question, Run]:
        """The person declines to answer: the run goes on, its turn told so (see the module's docstring)."""
        return await self._close(question_id, "cancelled", None, by)

    async def _close(self, question_id: str, state: str, answer: str | None, by: str) -> tuple[Question, Run]:
        await self._expire()
        run = await self.queue.resume(question_id, state=state, answer=answer, by=by)
        return await questionstore.get(self.db, question_id), run

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
                await self.queue.resume(question.id, state="defaulted", answer=question.default, by=EXPIRED_BY)
            except Conflict as exc:  # answered meanwhile (by the person, another gateway): theirs stands
                log.debug("question %s not defaulted: %s", question.id, exc)
                continue
            log.info("question %s expired unanswered: its run resumed with %s", question.id, question.default)
        await self.db.durable()
