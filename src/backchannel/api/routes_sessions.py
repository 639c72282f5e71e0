"""Session routes: list, create, read, messages, chat and chat/stream."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..core.directory import Delivery
from ..errors import DeliveryError
from ..store.runs import RunState
from . import shapes
from .context import Context, context, submit
from .http import int_param, json_body, optional_str, profile_of, text_field


async def list_sessions(request: Request) -> Response:
    ctx = context(request)
    profile = ctx.router.check_profile(profile_of(request))
    limit = int_param(request, "limit", 50, low=1, high=10_000)
    offset = int_param(request, "offset", 0, low=0, high=10**9)
    title = request.query_params.get("title") or None
    rows = ctx.router.sessions(profile, title=title, limit=limit + 1, offset=offset)
    return JSONResponse(
        {
            "object": "list",
            "data": [shapes.session(r) for r in rows[:limit]],
            "limit": limit,
            "offset": offset,
            "has_more": len(rows) > limit,
        }
    )


async def create_session(request: Request) -> Response:
    ctx = context(request)
    profile = ctx.router.check_profile(profile_of(request))
    body = await json_body(request, ctx.settings.max_body_bytes)
    session_id = optional_str(body, "id") or optional_str(body, "session_id")
    title = optional_str(body, "title")
    source = optional_str(body, "source") or "api"
    row, created = ctx.router.create_session(profile, title=title, source=source[:32], session_id=session_id)
    return JSONResponse(
        {"object": "hermes.session", "session": shapes.session(row)}, status_code=201 if created else 200
    )


async def get_session(request: Request) -> Response:
    ctx = context(request)
    profile = ctx.router.check_profile(profile_of(request))
    row = ctx.router.session(request.path_params["session_id"], profile=profile)
    return JSONResponse({"object": "hermes.session", "session": shapes.session(row)})


async def session_messages(request: Request) -> Response:
    ctx = context(request)
    profile = ctx.router.check_profile(profile_of(request))
    session_id = request.path_params["session_id"]
    messages = ctx.router.messages(session_id, profile=profile)
    return JSONResponse({"object": "list", "session_id": session_id, "data": [m.to_dict() for m in messages]})


async def _submit(request: Request, ctx: Context) -> tuple[Any, Delivery, float, bool, str]:
    profile = ctx.router.check_profile(profile_of(request))
    session = ctx.router.session(request.path_params["session_id"], profile=profile)
    body = await json_body(request, ctx.settings.max_body_bytes)
    delivery, headers = submit(request, ctx, session, body, text_field(body, "message", "input", required=True))
    wait = headers.wait_seconds if headers.wait_seconds is not None else ctx.settings.http_wait_seconds
    return session, delivery, wait, headers.wants_envelope, profile


async def chat(request: Request) -> Response:
    ctx = context(request)
    started = time.monotonic()
    _session, first, wait, envelope, profile = await _submit(request, ctx)
    run = await ctx.router.wait(first.run.id, wait, known=first.run)
    delivery = Delivery(run, first.replayed, ctx.router.queue_position(run), time.monotonic() - started)
    if envelope:
        return JSONResponse(shapes.send_result(delivery, profile=profile))
    if run.state is RunState.COMPLETED:
        return JSONResponse(shapes.completion(delivery), headers={"X-Hermes-Session-Id": run.session_id})
    if not run.state.terminal:
        return JSONResponse(shapes.queued(delivery), status_code=202, headers={"X-Hermes-Session-Id": run.session_id})
    raise DeliveryError(
        f"run {run.id} {run.state.value}: {run.error or 'no reply'}",
        code=run.error_code or f"run_{run.state.value}",
        details={"run_id": run.id, "status": run.state.value, "output": run.reply},
    )


async def chat_stream(request: Request) -> Response:
    ctx = context(request)
    session, first, wait, _envelope, _profile = await _submit(request, ctx)
    run_id = first.run.id
    deadline = time.monotonic() + wait
    hub = ctx.router.runtime.events
    from_store = first.replayed and not hub.known(run_id)
    if not from_store:
        hub.reserve(run_id)  # before the run can start: the stream sees all of its events

    async def frames() -> AsyncIterator[dict[str, str]]:
        seq = 0

        def frame(event: str, **data: Any) -> dict[str, str]:
            nonlocal seq
            seq += 1
            payload = {"session_id": session.id, "run_id": run_id, "seq": seq, "ts": time.time(), **data}
            return {"event": event, "data": json.dumps(payload, ensure_ascii=False)}

        yield frame("run.started", user_message={"role": "user", "content": first.run.message}, replayed=first.replayed)
        yield frame("message.started", message={"id": run_id, "role": "assistant"})
        if from_store:  # a replay of a run this process has no events for: the store has its outcome
            current = await ctx.router.wait(run_id, wait)
            if current.state.terminal:
                await ctx.router.db.durable()
                yield _final(frame, current.state.value, current.reply, current.error, run_id)
            else:
                yield frame(
                    "run.queued",
                    status=current.state.value,
                    delivery_id=run_id,
                    queue_position=ctx.router.queue_position(current),
                )
            yield frame("done")
            return
        async for event in hub.follow(run_id, keepalive=min(15.0, max(0.1, wait)), reserved=True):
            if event is None:
                current = ctx.router.run(run_id)
                if current.state.terminal:
                    await ctx.router.db.durable()
                    yield _final(frame, current.state.value, current.reply, current.error, run_id)
                    break
                if time.monotonic() >= deadline:
                    yield frame(
                        "run.queued",
                        status=current.state.value,
                        delivery_id=run_id,
                        queue_position=ctx.router.queue_position(current),
                    )
                    break
                continue
            name = event["event"]
            if name == "message.delta":
                yield frame("assistant.delta", message_id=run_id, delta=event["delta"])
            elif name in ("tool.started", "tool.completed"):
                yield frame(
                    name,
                    message_id=run_id,
                    tool_name=event["tool"],
                    preview=event.get("preview"),
                    error=event.get("error"),
                )
            elif name.startswith("run.") and name != "run.started":
                await ctx.router.db.durable()
                yield _final(frame, name[4:], event.get("output"), event.get("error"), run_id)
                break
        yield frame("done")

    return EventSourceResponse(frames(), ping=15)


def _final(
    frame: Callable[..., dict[str, str]], state: str, output: str | None, error: str | None, run_id: str
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
    result: dict[str, str] = frame("error", message=error or state, status=state, output=output)
    return result
