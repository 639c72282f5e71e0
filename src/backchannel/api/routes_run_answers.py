"""A run's question answered by the run's own sender over the Hermes dialect (issue 42): `POST
/v1/runs/{run_id}/answer` `{answer}` (or `{cancel: true}`). A Backchannel peer that follows a run it sent us sees it
`input_required` with its `question` (GET /v1/runs/{id}) and answers here, as an A2A caller answers with the task's
id: the question is the sender's, never this gateway's person's."""

from __future__ import annotations

from typing import cast

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import dialect
from ..errors import Conflict, UsageError
from .context import caller, context
from .http import flag, json_body, run_scope, sender_of, text_field


async def answer_run(request: Request) -> Response:
    ctx = context(request)
    who = caller(request)
    run = who.require_run(
        await ctx.messages.run(request.path_params["run_id"], profile=run_scope(request, ctx.roster)), stopping=True
    )
    body = await json_body(request, ctx.settings.max_body_bytes, timeout=ctx.settings.body_timeout_seconds)
    answer, cancel = text_field(body, "answer", "input", "message", "text"), flag(body, "cancel")
    if (answer is None) == (not cancel):
        raise UsageError("give either `answer` (text) or `cancel: true`", code="invalid_request")
    question = await ctx.messages.asked(run.id)
    if question is None:
        raise Conflict(f"run {run.id!r} asked no question", code="no_question")
    by = sender_of(request) if who.is_person else who.principal
    if cancel:
        closed, resumed = await ctx.messages.decline(question.id, by=by)
    else:
        assert answer is not None
        closed, resumed = await ctx.messages.answer(question.id, answer, by=by)
    shown = dialect.run_of(resumed, None) if resumed is not None else None
    return JSONResponse(cast(dialect.QuestionClosed, {**closed.to_dict(), "run": shown}))
