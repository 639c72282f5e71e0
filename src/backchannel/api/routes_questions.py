"""The questions turns ask their person (`ask_person`, issue 42; the person's key only): list, one, answer or
decline. The CLI's `backchannel ask` uses these; the first answer from any surface wins."""

from __future__ import annotations

from typing import cast

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import dialect
from ..errors import UsageError
from .context import context
from .http import flag, int_param, json_body, optional_str, sender_of

ANY = "any"  # `?state=any`: every question, whatever its state


async def list_questions(request: Request) -> Response:
    state = request.query_params.get("state", "open")
    limit = int_param(request, "limit", 100, low=1, high=1000)
    for_peer = _for_peer(request)
    rows = await context(request).gateway.admin.questions(
        state=None if state == ANY else state, limit=limit, for_peer=for_peer
    )
    return JSONResponse({"object": "list", "data": [q.to_dict() for q in rows]})


async def get_question(request: Request) -> Response:
    question = await context(request).gateway.admin.question(request.path_params["question_id"])
    return JSONResponse(question.to_dict())


async def answer_question(request: Request) -> Response:
    ctx = context(request)
    body = await json_body(request, ctx.settings.max_body_bytes)
    answer, cancel = optional_str(body, "answer"), flag(body, "cancel")
    if (answer is None) == (not cancel):
        raise UsageError("give either `answer` (text) or `cancel: true`", code="invalid_request")
    question_id, by = request.path_params["question_id"], sender_of(request)
    admin = ctx.gateway.admin
    if cancel:
        question, run = await admin.decline(question_id, by=by)
    else:
        assert answer is not None
        question, run = await admin.answer(question_id, answer, by=by)
    shown = dialect.run_of(run, None) if run is not None else None
    closed = cast(dialect.QuestionClosed, {**question.to_dict(), "run": shown})
    return JSONResponse(closed)


FOR_PEER = {"false": False, "true": True, ANY: None}


def _for_peer(request: Request) -> bool | None:
    """`?for_peer=`: false (default), the person's questions; true, those asked in runs peers sent us (each peer
    answers its own); any, every one (with those a peer's agent asked one of our agents, which that agent answers)."""
    given = request.query_params.get("for_peer", "false")
    if given not in FOR_PEER:
        raise UsageError("for_peer must be true, false or any", code="invalid_request")
    return FOR_PEER[given]
