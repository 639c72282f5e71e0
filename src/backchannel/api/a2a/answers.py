"""A message that names a task waiting for its person's answer (INPUT_REQUIRED) is that answer.

Its text answers the run's open question, once, as the person's answer from any other surface would
(`Questions.answer`, `answered_by` the caller): the same run goes back in its session's queue and the same task
goes on. A second answer, from here or from another surface, is refused with `question_closed` and changes
nothing. Files sent with an answer are not kept (the answer is text, read as the session's next message).
"""

from __future__ import annotations

from a2a.types import Message

from ...core.facades import Messages
from ...errors import Conflict
from ...records import Question, Run
from . import inbound


async def answer(delivery: Messages, run: Run, question: Question, message: Message, *, by: str) -> Run:
    """Answer `question` of the caller's run with the message's text: the run, queued again. Conflict
    (`question_closed`) when the question was answered, defaulted or declined already."""
    if not question.is_open:
        raise Conflict(
            f"the question of task {run.id!r} is {question.state} already"
            f"{f' (by {question.answered_by})' if question.answered_by else ''}: it is answered once",
            code="question_closed",
        )
    _, resumed = await delivery.answer(question.id, inbound.read(message).text, by=by)
    return resumed
