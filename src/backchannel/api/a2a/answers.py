"""A message that names a task waiting for its person's answer (INPUT_REQUIRED) is that answer.

Its text answers the run's open question, once, as the person's answer from any other surface would
(`Questions.answer`, `answered_by` the caller): the same run goes back in its session's queue and the same task
goes on. A message naming a task whose question is closed (answered here or on another surface, defaulted at
expiry, declined) is UnsupportedOperation with `question_closed`, whatever the task's state: it changes nothing.
Files sent with an answer are not kept (the answer is text, read as the session's next message).
"""

from __future__ import annotations

from typing import NoReturn

from a2a.types import Message
from a2a.utils.errors import UnsupportedOperationError

from ...core.facades import Messages
from ...errors import Conflict
from ...records import Question, Run
from . import inbound


async def answer(delivery: Messages, run: Run, question: Question, message: Message, *, by: str) -> Run:
    """Answer `question` of the caller's run with the message's text: the run, queued again.
    UnsupportedOperation (`question_closed`) when the question was answered, defaulted or declined already."""
    if not question.is_open:
        closed(run, question)
    try:
        _, resumed = await delivery.answer(question.id, inbound.read(message).text, by=by)
    except Conflict as exc:  # answered meanwhile, from another request or surface
        if exc.code != "question_closed":
            raise
        closed(run, question)
    assert resumed is not None  # a run of ours asked it (a peer's question relayed here is no task of ours)
    return resumed


def closed(run: Run, question: Question) -> NoReturn:
    by = f" (by {question.answered_by})" if question.answered_by else ""
    raise UnsupportedOperationError(
        f"the question of task {run.id!r} ({question.id}) is closed{by}: it is answered once; send a new message"
        " without taskId to say more",
        {"code": "question_closed"},
    )
