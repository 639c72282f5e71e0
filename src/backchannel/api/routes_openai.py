"""Hermes's OpenAI-compatible routes: POST /v1/chat/completions and POST /v1/responses, through the one delivery path.

`model` names the profile (its Hermes name `hermes-agent`, or none, is the profile of the path); the session is the
one `X-Hermes-Session-Id` names (for a response, also the one `previous_response_id` was answered in), else a new one,
whose id the answer's `X-Hermes-Session-Id` gives back. The session holds the history: only the last user message of
`messages` (or `input`) is delivered, as a run (durable, with its key, outcome and receipts) like any other message.
A request without `Idempotency-Key` is a new message; only an OpenAI SDK's automatic retry of it (it says
`X-Stainless-Retry-Count`) is answered by its first run, within `gateway.dedup_window_seconds`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..core.delivery.admission import Attempt
from ..core.delivery.delivery import Delivered, WaitOver
from ..errors import DeliveryError, KeyRevoked, NotFound, UsageError
from ..events import Ended
from ..outcome import Outcome
from ..records import Session
from . import openai_shapes as shapes
from .context import Context, caller, context, incoming, stream_slot
from .http import json_body, profile_of
from .lf_streams import event_stream

HERMES_MODEL = "hermes-agent"  # what Hermes's clients name a gateway's own model
RETRY_HEADER = "x-stainless-retry-count"  # the OpenAI SDKs' count of the attempts before this one


@dataclass(frozen=True)
class Asked:
    """A request of either route, read: the profile, the message, the session, and whether it streams."""

    profile: str
    text: str
    stream: bool
    message: Attempt
    wait: float | None


async def chat_completions(request: Request) -> Response:
    ctx = context(request)
    body = await json_body(request, ctx.settings.max_body_bytes, timeout=ctx.settings.body_timeout_seconds)
    profile = _profile(request, ctx, body.get("model"))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise UsageError("field 'messages' must be a non-empty list of messages", code="missing_message")
    asked = await _asked(request, ctx, body, profile, _last_user_text(messages, "messages"), session_id=None)
    if asked.stream:
        return await _stream(request, ctx, asked, shapes.ChatFrames(asked.profile))
    d = await ctx.messages.deliver(asked.message, wait=asked.wait)
    return _answer(d, shapes.chat_completion(d, asked.profile))


async def responses(request: Request) -> Response:
    ctx = context(request)
    body = await json_body(request, ctx.settings.max_body_bytes, timeout=ctx.settings.body_timeout_seconds)
    profile = _profile(request, ctx, body.get("model"))
    given = body.get("input")
    if isinstance(given, str):
        text = given
    elif isinstance(given, list) and given:
        text = _last_user_text([{"role": "user", "content": i} if isinstance(i, str) else i for i in given], "input")
    else:
        raise UsageError("field 'input' must be a string or a non-empty list of input items", code="missing_message")
    if body.get("conversation") is not None:
        raise UsageError(
            "'conversation' is not supported here: continue with previous_response_id or X-Hermes-Session-Id",
            code="unsupported_parameter",
        )
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        raise UsageError("field 'previous_response_id' must be a string", code="invalid_request")
    session_id = None
    if previous:
        run = await ctx.messages.run(shapes.run_id_of_response(previous))
        caller(request).require_run(run)
        session_id = run.session_id
    asked = await _asked(request, ctx, body, profile, text, session_id=session_id)
    if asked.stream:
        return await _stream(request, ctx, asked, shapes.ResponseFrames(asked.profile))
    d = await ctx.messages.deliver(asked.message, wait=asked.wait)
    return _answer(d, shapes.response(d, asked.profile))


# --- reading a request ----------------------------------------------------------------------------------------


async def _asked(
    request: Request, ctx: Context, body: dict[str, Any], profile: str, text: str, *, session_id: str | None
) -> Asked:
    who = caller(request)
    who.require_profile(profile)
    named = (request.headers.get("x-hermes-session-id") or "").strip() or session_id
    session = await _session(ctx, request, profile, named)
    message, headers = incoming(request, ctx, session, body, text)
    if message.key is None and _retry(request):  # an OpenAI SDK asking again: its first run, if it was accepted
        message = dataclasses.replace(message, retry_window=float(ctx.settings.dedup_window_seconds))
    if named is None:  # each attempt makes a session: the fingerprint names what they share
        message = dataclasses.replace(message, scope=f"{profile}\0new-session")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise UsageError("field 'stream' must be true or false", code="invalid_request")
    wait = headers.wait_or(ctx.settings.http_wait_seconds)
    return Asked(profile=profile, text=text, stream=bool(stream), message=message, wait=wait)


def _profile(request: Request, ctx: Context, model: Any) -> str:
    """The profile `model` names: the path's when none is given (or Hermes's own model name), else that profile;
    under /p/<profile> only that one."""
    path = profile_of(request)
    if model is None or model == "" or model == HERMES_MODEL:
        return ctx.roster.check_profile(path)
    if not isinstance(model, str):
        raise UsageError("field 'model' must be a string: a profile's name (GET /v1/models)", code="invalid_request")
    if "profile" in request.path_params and model != path:
        raise UsageError(f"model {model!r} is not the profile {path!r} this path serves", code="model_not_found")
    try:
        return ctx.roster.check_profile(model)
    except NotFound as exc:
        raise NotFound(
            f"no model {model!r}: {exc.message} (GET /v1/models lists them)", code="model_not_found"
        ) from exc


async def _session(ctx: Context, request: Request, profile: str, session_id: str | None) -> Session:
    who = caller(request)
    if session_id is not None:
        return who.require_bot_chat(await ctx.roster.known(session_id, profile=profile))
    if not who.is_person:  # a peer's key reaches the Bot Chat alone
        return await ctx.roster.open_bot_chat(profile)
    row, _created = await ctx.roster.create_session(
        profile, source="openai", limit=ctx.settings.max_sessions_per_profile
    )
    return row


def _last_user_text(messages: list[Any], field: str) -> str:
    """The text of the last user message (its content a string, or parts whose text is joined)."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            text = _text(message.get("content"))
            if text.strip():
                return text
            break
    raise UsageError(f"no user message with text in {field!r}", code="missing_message")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text") or "")
            for p in content
            if isinstance(p, dict) and p.get("type", "text") in ("text", "input_text", "output_text")
        )
    raise UsageError("a message's 'content' must be a string or a list of text parts", code="invalid_payload")


def _retry(request: Request) -> bool:
    count = request.headers.get(RETRY_HEADER, "").strip()
    return count.isdigit() and int(count) > 0


# --- answering --------------------------------------------------------------------------------------------------


def _answer(d: Delivered, body: dict[str, Any]) -> Response:
    headers = {"X-Hermes-Session-Id": d.run.session_id}
    outcome = d.result.outcome
    if outcome is Outcome.DELIVERED:
        return JSONResponse(body, headers=headers)
    if outcome in (Outcome.RECEIPT, Outcome.HELD):  # the wait ran out: a receipt, as the chat route gives one
        return JSONResponse(shapes.receipt(d), status_code=202, headers=headers)
    raise DeliveryError(
        f"run {d.run.id} {d.run.state.value}: {d.run.error or 'no reply'}",
        code=d.run.error_code or f"run_{d.run.state.value}",
        details={"run_id": d.run.id, "status": d.run.state.value, "output": d.run.reply},
    )


async def _stream(request: Request, ctx: Context, asked: Asked, frames: shapes.Frames) -> Response:
    with stream_slot(request) as slot:  # before the message is handed in: a refused stream sent nothing
        first = await ctx.messages.submit(asked.message)
        live = await ctx.messages.reserve_events(first.run.id)
        headers = {"X-Hermes-Session-Id": first.run.session_id}
        stream = _events(request, ctx, first, frames, live)
        return slot.holding(event_stream(stream, headers=headers))


async def _events(
    request: Request, ctx: Context, first: Delivered, frames: shapes.Frames, live: bool
) -> AsyncIterator[dict[str, str]]:
    """The run's progress as the route's frames, until its end (a stream follows its run whatever the wait)."""
    for out in _sse(frames.start(first)):
        yield out
    progress = ctx.messages.watch(first.run.id, None, reserved=live)
    try:
        async for step in ctx.gateway.keys.while_valid(caller(request), progress):
            if step is None or isinstance(step, WaitOver):
                continue
            said = frames.end(await ctx.messages.run(first.run.id)) if isinstance(step, Ended) else frames.step(step)
            for out in _sse(said):
                yield out
    except KeyRevoked as exc:
        run = await ctx.messages.run(first.run.id)
        for out in _sse(frames.cut(run.state.value, exc.code, exc.message)):
            yield out
    finally:
        await progress.aclose()


def _sse(frames: list[shapes.Frame]) -> list[dict[str, str]]:
    out = []
    for name, data in frames:
        frame = {"data": data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}
        if name is not None:
            frame["event"] = name
        out.append(frame)
    return out
