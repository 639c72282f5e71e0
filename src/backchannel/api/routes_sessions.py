"""Session routes: list, create, read, messages, chat and chat/stream."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import dialect
from ..core.delivery.admission import Attempt
from ..core.delivery.delivery import WaitOver
from ..errors import DeliveryError, Forbidden, KeyRevoked, Refused
from ..events import Chunk, Ended, Queued, Step
from ..outcome import Outcome
from ..records import BOT_CHAT_TITLE
from . import shapes
from .context import Context, caller, context, incoming, stream_slot
from .http import DeliveryHeaders, int_param, json_body, optional_str, profile_of, text_field
from .lf_streams import event_stream

WAITING_TICK_SECONDS = 1.0  # how often a stream looks again at how many runs its queued run waits behind


async def list_sessions(request: Request) -> Response:
    ctx = context(request)
    profile = ctx.roster.check_profile(profile_of(request))
    limit = int_param(request, "limit", 50, low=1, high=10_000)
    offset = int_param(request, "offset", 0, low=0, high=10**9)
    title = request.query_params.get("title") or None
    who = caller(request)
    if not who.is_person and not who.read:
        title = BOT_CHAT_TITLE  # a peer's key sees its profiles' Bot Chats only
    rows = await ctx.roster.sessions(profile, title=title, limit=limit + 1, offset=offset)
    return JSONResponse(
        {
            "object": "list",
            "data": [dialect.session_of(r) for r in rows[:limit]],
            "limit": limit,
            "offset": offset,
            "has_more": len(rows) > limit,
        }
    )


async def create_session(request: Request) -> Response:
    ctx = context(request)
    profile = ctx.roster.check_profile(profile_of(request))
    body = await json_body(request, ctx.settings.max_body_bytes, timeout=ctx.settings.body_timeout_seconds)
    session_id = optional_str(body, "id") or optional_str(body, "session_id")
    title = optional_str(body, "title")
    source = optional_str(body, "source") or "api"
    who = caller(request)
    if not who.is_person and (session_id is not None or (title or "").strip() != BOT_CHAT_TITLE):
        raise Forbidden(
            f"{who.shown} may find or create only the Bot Chat (title {BOT_CHAT_TITLE!r}), no other session"
        )
    row, created = await ctx.roster.create_session(
        profile, title=title, source=source[:32], session_id=session_id, limit=ctx.settings.max_sessions_per_profile
    )
    return JSONResponse(
        {"object": "hermes.session", "session": dialect.session_of(row)}, status_code=201 if created else 200
    )


async def get_session(request: Request) -> Response:
    ctx = context(request)
    profile = ctx.roster.check_profile(profile_of(request))
    row = await ctx.roster.session(request.path_params["session_id"], profile=profile)
    caller(request).require_bot_chat(row, reading=True)
    return JSONResponse({"object": "hermes.session", "session": dialect.session_of(row)})


async def session_messages(request: Request) -> Response:
    ctx = context(request)
    profile = ctx.roster.check_profile(profile_of(request))
    session_id = request.path_params["session_id"]
    caller(request).require_read("reading a session's messages")
    messages = await ctx.roster.messages(session_id, profile=profile)
    return JSONResponse({"object": "list", "session_id": session_id, "data": [m.to_dict() for m in messages]})


async def _incoming(request: Request, ctx: Context) -> tuple[Attempt, DeliveryHeaders, str]:
    profile = ctx.roster.check_profile(profile_of(request))
    session = caller(request).require_bot_chat(
        await ctx.roster.known(request.path_params["session_id"], profile=profile)
    )
    body = await json_body(request, ctx.settings.max_body_bytes, timeout=ctx.settings.body_timeout_seconds)
    message_in, headers = incoming(request, ctx, session, body, text_field(body, "message", "input", required=True))
    return message_in, headers, profile


async def chat(request: Request) -> Response:
    ctx = context(request)
    message_in, headers, profile = await _incoming(request, ctx)
    wait = headers.wait_or(ctx.settings.http_wait_seconds)
    try:
        d = await ctx.messages.deliver(message_in, wait=wait)
    except Refused as exc:
        if not headers.wants_envelope:
            raise
        # The receipt dialect's own answer to a policy refusal: its clients read `refused` (hermes peer: exit 2).
        sid = message_in.session.id if message_in.session else None
        return JSONResponse(shapes.refused_result(exc, profile=profile, session_id=sid))
    if headers.wants_envelope:
        return JSONResponse(
            shapes.send_result(d, profile=profile, ahead=await ctx.messages.runs_ahead(d.run.id)),
            headers=shapes.consumed_header(d.run),
        )
    outcome = d.result.outcome
    if outcome is Outcome.DELIVERED:
        return JSONResponse(shapes.completion(d), headers={"X-Hermes-Session-Id": d.run.session_id})
    if outcome in (Outcome.RECEIPT, Outcome.HELD):
        return JSONResponse(shapes.queued(d), status_code=202, headers={"X-Hermes-Session-Id": d.run.session_id})
    raise DeliveryError(
        f"run {d.run.id} {d.run.state.value}: {d.run.error or 'no reply'}",
        code=d.run.error_code or f"run_{d.run.state.value}",
        details={"run_id": d.run.id, "status": d.run.state.value, "output": d.run.reply},
    )


async def chat_stream(request: Request) -> Response:
    ctx = context(request)
    message_in, headers, _profile = await _incoming(request, ctx)
    with stream_slot(request) as slot:  # before the message is handed in: a refused stream sent nothing
        return slot.holding(await chat_events(request, ctx, message_in, headers))


async def chat_events(request: Request, ctx: Context, message_in: Attempt, headers: DeliveryHeaders) -> Response:
    """The message handed in, then its run's events as they happen, until its end (or `wait` runs out)."""
    wait = headers.wait_or(ctx.settings.http_wait_seconds)
    first = await ctx.messages.submit(message_in, wait=wait)
    run_id, session_id = first.run.id, first.run.session_id
    live = await ctx.messages.reserve_events(run_id)  # before the run can start: the stream sees all its events
    seq = 0

    def frame(event: str, **data: Any) -> dict[str, str]:
        nonlocal seq
        seq += 1
        payload = {"session_id": session_id, "run_id": run_id, "seq": seq, "ts": time.time(), **data}
        return {"event": event, "data": json.dumps(payload, ensure_ascii=False)}

    async def frames() -> AsyncIterator[dict[str, str]]:
        yield frame(
            "run.started",
            user_message={"role": "user", "content": first.run.message},
            replayed=first.result.replayed,
            profile=first.run.profile,  # whose session: a message sent to an address learns it here
        )
        yield frame("message.started", message={"id": run_id, "role": "assistant"})
        # While the run waits behind others in its session's queue, say behind how many (again when that changes).
        waited = False
        tick = min(WAITING_TICK_SECONDS, max(0.1, wait))
        progress = ctx.messages.watch(run_id, wait, tick=tick, reserved=live)
        async with contextlib.aclosing(progress):
            async for step in progress:
                if isinstance(step, Queued):
                    if step.ahead or waited:
                        yield frame("run.waiting", status="queued", runs_ahead=step.ahead)
                        waited = True
                elif isinstance(step, Chunk):
                    yield frame("assistant.delta", message_id=run_id, delta=step.text)
                elif isinstance(step, Step):
                    yield frame(
                        step.name, message_id=run_id, tool_name=step.tool, preview=step.preview, error=step.error
                    )
                elif isinstance(step, WaitOver):
                    yield frame(
                        "run.queued",
                        status=step.result.state,
                        delivery_id=run_id,
                        queue_position=step.result.queue_position,
                    )
                elif isinstance(step, Ended):
                    yield _final(frame, step.state, step.output, step.error, step.code, run_id)
        yield frame("done")

    async def while_valid() -> AsyncIterator[dict[str, str]]:
        """The frames until the run's end, or until the key the stream was opened with is revoked."""
        try:
            async for f in ctx.gateway.keys.while_valid(caller(request), frames()):
                yield f
        except KeyRevoked as exc:
            state = (await ctx.messages.run(run_id)).state.value
            yield frame("error", message=exc.message, status=state, code=exc.code, output=None)
            yield frame("done")

    return event_stream(while_valid())


def _final(
    frame: Callable[..., dict[str, str]],
    state: str,
    output: str | None,
    error: str | None,
    code: str | None,
    run_id: str,
) -> dict[str, str]:
    if state == "completed":
        return frame(
            "assistant.completed",
            message_id=run_id,
            content=output or "",
            completed=True,
            partial=False,
            interrupted=False,
        )
    result: dict[str, str] = frame("error", message=error or state, status=state, code=code, output=output)
    return result
