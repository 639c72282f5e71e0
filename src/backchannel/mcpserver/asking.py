"""A send whose run asks the person behind the MCP host (`ask_person`, issue 42), and the wait for its reply.

While `send_to_session` waits, the run it sent may park `input_required` with a question whose asker is this host's
session: the host's person is asked. A host that takes elicitation is asked there: on the 2025 protocol versions by
`elicitation/create` while the call waits; on 2026-07-28 the call answers the SDK's `input_required` result and the
host's retry carries the answer (its `request_state` names the question and its run). The answer, or a decline,
resumes the run and the call goes on waiting for its reply (at most `max_wait()` more). A host that takes none gets
the receipt, naming the question and how its person answers it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..errors import Conflict
from .backends import Backend

POLL_SECONDS = 0.25  # how often a waiting send looks for a question to its host's person
KEY = "answer"  # the one input request of an `input_required` result, and the form's one field
Outcome = tuple[dict[str, Any], bool]
Tick = Callable[[], Awaitable[None]]
_kept: set[asyncio.Task[Any]] = set()  # sends left waiting on their own while the host answers (2026-07-28)


class Asked(Exception):
    """The host is asked through the call's `input_required` result (2026-07-28)."""

    def __init__(self, result: types.InputRequiredResult) -> None:
        super().__init__("input required")
        self.result = result


def can_elicit(ctx: ServerRequestContext[Any, Any]) -> bool:
    caps = ctx.session.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


class Asking:
    """One `send_to_session` call of a host: its wait, and the questions its run asks the host's person."""

    def __init__(
        self, ctx: ServerRequestContext[Any, Any], backend: Backend, profile: str, session: str, tick: Tick
    ) -> None:
        self.ctx, self.backend, self.profile, self.session, self.tick = ctx, backend, profile, session, tick
        self.asker = f"{profile}/{session}"
        self.elicits = can_elicit(ctx)

    async def send(self, call: Awaitable[Outcome], max_wait: float) -> Outcome:
        """Run the send `call`; a question to the host's person on the way is asked to the host (Asked on
        2026-07-28), then the call goes on waiting for the reply."""
        task: asyncio.Task[Outcome] = asyncio.ensure_future(call)
        since, seen, answered = time.time() - 1.0, set[str](), None
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=POLL_SECONDS)
                if done:
                    break
                await self.tick()
                question = await self._new(seen, since) if self.elicits else None
                if question is None:
                    continue
                seen.add(question["id"])
                if modern(self.ctx):
                    _keep(task)  # its wait goes on (then the wake on reply, as for any receipt); the retry follows
                    raise Asked(input_required(question))
                await self.answer(question, await self._elicit(question))
                answered = time.monotonic()
        finally:
            if not task.done() and task not in _kept:
                task.cancel()
        result, ok = task.result()
        if answered is not None and _waiting(result):
            return await self.follow(str(result["run_id"]), answered + max_wait)
        return await self.told(result, ok)

    async def resume(self, params: types.CallToolRequestParams, max_wait: float) -> Outcome:
        """The host's retry (2026-07-28): its answer to the question its `request_state` names; then the reply."""
        state = json.loads(params.request_state or "{}")
        question = await self.backend.question(str(state.get("question", "")))
        if question.get("asker") != self.asker or question.get("run_id") != state.get("run"):
            raise Conflict("this host was not asked that question", code="question_not_asked")
        response = (params.input_responses or {}).get(KEY)
        await self.answer(question, response if isinstance(response, types.ElicitResult) else None)
        return await self.follow(str(question["run_id"]), time.monotonic() + max_wait)

    async def follow(self, run_id: str, deadline: float) -> Outcome:
        """The run as check_message tells it, once it ends or at `deadline`; a new question to the host's person on
        the way is asked too."""
        seen: set[str] = set()
        while True:
            result, ok = await self.backend.call(
                self.profile, self.session, "check_message", {"run_id": run_id}, wait=0.0
            )
            if not _waiting(result) or time.monotonic() >= deadline:
                return await self.told(result, ok)
            question = await self._new(seen, 0.0, run_id=run_id) if self.elicits else None
            if question is not None:
                seen.add(question["id"])
                if modern(self.ctx):
                    raise Asked(input_required(question))
                await self.answer(question, await self._elicit(question))
            await self.tick()
            await asyncio.sleep(POLL_SECONDS)

    async def told(self, result: dict[str, Any], ok: bool) -> Outcome:
        """A receipt of a run that waits for its person's answer names the question and how to answer it."""
        if result.get("state") != "input_required" or not result.get("run_id"):
            return result, ok
        for question in await self.backend.open_questions():
            if question.get("run_id") == result["run_id"]:
                result["question"] = {
                    k: question.get(k) for k in ("id", "question", "choices", "default", "expires_at")
                }
                result["note"] = (
                    f"The other agent asked your user a question and waits for the answer: {question['question']!r}."
                    f" Tell your user; they answer with `backchannel ask answer {question['id']} TEXT` (or decline with"
                    f" `backchannel ask cancel {question['id']}`). The reply comes into this session later."
                )
        return result, ok

    async def answer(self, question: dict[str, Any], response: types.ElicitResult | None) -> None:
        """The host's accept is the answer; a decline, a cancel or no answer at all declines the question."""
        content = response.content if response is not None and response.action == "accept" else None
        text = content.get(KEY) if content else None
        answer = str(text).strip() if text is not None and str(text).strip() else None
        with contextlib.suppress(Conflict):  # answered meanwhile from another surface: the first answer stands
            await self.backend.close_question(str(question["id"]), answer)

    async def _elicit(self, question: dict[str, Any]) -> types.ElicitResult | None:
        form = elicitation(question)
        try:
            return await self.ctx.session.elicit_form(
                form.message, form.requested_schema, related_request_id=self.ctx.request_id
            )
        except Exception:  # a host that fails the request: as if it declined
            return None

    async def _new(self, seen: set[str], since: float, *, run_id: str | None = None) -> dict[str, Any] | None:
        for question in await self.backend.open_questions():
            if (
                question.get("asker") == self.asker
                and question["id"] not in seen
                and float(question.get("created_at") or 0) >= since
                and (run_id is None or question.get("run_id") == run_id)
            ):
                return question
        return None


def elicitation(question: dict[str, Any]) -> types.ElicitRequestFormParams:
    """The question as a form of one field, `answer` (its choices an enum, its default the field's)."""
    field: dict[str, Any] = {"type": "string", "title": "Answer", "description": question["question"]}
    if question.get("choices"):
        field["enum"] = list(question["choices"])
    if question.get("default") is not None:
        field["default"] = question["default"]
    message = f"{question.get('profile') or 'An agent'} asks: {question['question']}"
    schema = {"type": "object", "properties": {KEY: field}, "required": [KEY]}
    return types.ElicitRequestFormParams(message=message, requested_schema=schema)


def input_required(question: dict[str, Any]) -> types.InputRequiredResult:
    state = json.dumps({"question": question["id"], "run": question["run_id"]})
    return types.InputRequiredResult(
        input_requests={KEY: types.ElicitRequest(params=elicitation(question))}, request_state=state
    )


def _waiting(result: dict[str, Any]) -> bool:
    return result.get("result") == "receipt" and bool(result.get("run_id"))


def _keep(task: asyncio.Task[Any]) -> None:
    _kept.add(task)

    def done(task: asyncio.Task[Any]) -> None:
        _kept.discard(task)
        if not task.cancelled():
            task.exception()  # its outcome is the run's, read by the retry: nothing to raise here

    task.add_done_callback(done)
