"""The person's line of a running turn (`PersonLine`): a far side's turn that waits for its person (a Hermes run's
dangerous-command approval) asks Backchannel's person instead, through the one question model (issue 42).

The question is in-turn (`Question.kind`): its run stays running, its worker's step waiting here, reading the
question until it is closed — answered (one of its choices) from any surface, declined or expired (its default) —
and that answer goes back to the far side by the engine. Its id comes from the run and the far side's key for it, so
a later attempt of the same turn (the gateway restarted meanwhile, the far side still waiting) finds the same
question, open or answered while no gateway read it, and never asks twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable

from ..agent.engines.base import TurnQuestion
from ..errors import Conflict, NotFound, StoreError
from ..records import Question, Run
from ..store import questions as questionstore
from ..store.driver import Db

log = logging.getLogger("backchannel.questions")
POLL_SECONDS = 0.5  # how often a waiting turn reads its question (any gateway of a shared store may close it)
EXPIRED_BY = "expiry"
STOPPED_BY = "stop"


def question_id(run_id: str, key: str) -> str:
    return "q_turn_" + hashlib.sha256(f"{run_id}\n{key}".encode()).hexdigest()[:20]


class RunPersonLine:
    """One run's line to its person while its turn runs; `stopped` says whether a stop cancelled the turn (the
    question closes with it) rather than the gateway going away (it stays open for the next attempt)."""

    def __init__(self, db: Db, run: Run, stopped: Callable[[], bool]) -> None:
        self.db = db
        self.run = run
        self.stopped = stopped

    async def ask(self, question: TurnQuestion) -> str:
        new = questionstore.NewQuestion(
            id=question_id(self.run.id, question.key),
            question=question.question,
            choices=question.choices,
            default=question.default,
            expires_in=question.expires_in,
        )
        await self.db.writable()
        asked = await questionstore.ask_in_turn(self.db, self.run, new)
        await self.db.durable()
        try:
            while asked.is_open:
                if asked.expires_at is not None and asked.expires_at < time.time():
                    asked = await self._close(asked.id, "defaulted", asked.default, EXPIRED_BY)
                    continue
                await asyncio.sleep(POLL_SECONDS)
                try:
                    asked = await questionstore.get(self.db, asked.id)
                except StoreError as exc:  # a passing store fault: read again next round
                    log.warning("question %s not read this round: %s", asked.id, exc.message)
        except asyncio.CancelledError:
            if self.stopped():
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._close(new.id, "cancelled", None, STOPPED_BY))
            raise
        return asked.answer if asked.state in ("answered", "defaulted") and asked.answer else question.default

    async def withdraw(self, key: str, *, by: str) -> None:
        with contextlib.suppress(Conflict, NotFound):
            await self._close(question_id(self.run.id, key), "cancelled", None, by)

    async def _close(self, qid: str, state: str, answer: str | None, by: str) -> Question:
        await self.db.writable()
        try:
            closed = await questionstore.close_in_turn(self.db, qid, state=state, answer=answer, by=by)
        except Conflict:
            return await questionstore.get(self.db, qid)  # closed meanwhile: that answer stands
        await self.db.durable()
        return closed
