"""Runs as A2A tasks: the states mapped, the reply as an artifact and a message, the reason as a status message.

    queued → SUBMITTED      held → SUBMITTED, its status message says it waits for the person's approval
    running → WORKING       completed → COMPLETED (the reply: an artifact and the last message of the history)
    failed, expired → FAILED    cancelled → CANCELED    denied (a held message refused) → REJECTED
    input_required → INPUT_REQUIRED, its status message the question its turn asked (role agent, the text the
        question; its id, choices, default and expiry under the Backchannel extension's URI in the metadata)
A message the policy refuses has no run: it is a REJECTED task of its own, with the refusal code.

A task's `contextId` is the one its caller gave (a conversation it started), else its session's id. A reply that
is structured output (one fenced JSON block and nothing else: how an engine gives it) adds a data part to the
reply artifact, after its text.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from typing import Any

from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf.json_format import ParseDict
from google.protobuf.timestamp_pb2 import Timestamp

from ... import a2a_extension
from ...keys import a2a_message_id
from ...messages import Attachment
from ...records import Question, Run, RunState

# The enum values read once: each `Role.ROLE_USER` is a protobuf wrapper's __getattr__ (~1.5 µs).
USER: Role = Role.ROLE_USER
AGENT: Role = Role.ROLE_AGENT
STATES: dict[RunState, TaskState] = {
    RunState.QUEUED: TaskState.TASK_STATE_SUBMITTED,
    RunState.HELD: TaskState.TASK_STATE_SUBMITTED,
    RunState.RUNNING: TaskState.TASK_STATE_WORKING,
    RunState.INPUT_REQUIRED: TaskState.TASK_STATE_INPUT_REQUIRED,
    RunState.COMPLETED: TaskState.TASK_STATE_COMPLETED,
    RunState.FAILED: TaskState.TASK_STATE_FAILED,
    RunState.EXPIRED: TaskState.TASK_STATE_FAILED,
    RunState.CANCELLED: TaskState.TASK_STATE_CANCELED,
    RunState.DENIED: TaskState.TASK_STATE_REJECTED,
}


# A reply that is exactly one fenced JSON block: the engine's structured output.
_STRUCTURED = re.compile(r"\A\s*```json[ \t]*\n(?P<json>.*)\n```\s*\Z", re.DOTALL)


def task_of(
    run: Run, *, context_id: str | None = None, files: Sequence[Attachment] = (), question: Question | None = None
) -> Task:
    """The task a run is: its id the run's, its context `context_id` (default: the run's session), the files its
    message came with in the history's first message; `question`: the one a run `input_required` waits on."""
    context = context_id or run.session_id
    asked = _message(run, a2a_message_id(run.idempotency_key) or f"{run.id}:in", USER, run.message, context)
    for file in files:
        asked.parts.append(file_part(file))
    task = Task(
        id=run.id,
        context_id=context,
        history=[asked],
        status=TaskStatus(state=STATES[run.state], timestamp=_stamp(run.updated_at)),
    )
    if run.consumed is not None or run.state.terminal:  # the model that read its message, or none ever will
        task.metadata.update(a2a_extension.consumed_entry(run.consumed.to_dict() if run.consumed else None))
    if run.state is RunState.COMPLETED:
        reply = _message(run, f"{run.id}:reply", AGENT, run.reply or "", context)
        task.artifacts.add(artifact_id=reply_artifact_id(run), name="reply", parts=reply_parts(run.reply or ""))
        task.history.append(reply)
        task.status.message.CopyFrom(reply)
    elif run.state is RunState.HELD:
        text = f"held for the person of {run.profile!r} to approve; the task goes on once they decide"
        task.status.message.CopyFrom(_message(run, f"{run.id}:held", AGENT, text, context, code="held"))
    elif run.state is RunState.INPUT_REQUIRED:
        task.status.message.CopyFrom(asking(run, context, question))
    elif run.state.terminal:
        said = run.error or run.state.value
        task.status.message.CopyFrom(_message(run, f"{run.id}:end", AGENT, said, context, code=run.error_code))
        if run.reply:
            task.artifacts.add(artifact_id=f"{run.id}:partial", name="partial output", parts=[Part(text=run.reply)])
    return task


def asking(run: Run, context_id: str, question: Question | None) -> Message:
    """An input-required task's status message: the question (its id, choices, default and expiry in the metadata
    under the Backchannel extension's URI); a follow-up message with the task's id answers it."""
    if question is None or question.run_id != run.id:  # not read (a push's body): GetTask shows it
        text = f"task {run.id!r} waits for its person's answer: GetTask shows the question"
        return _message(run, f"{run.id}:asks", AGENT, text, context_id, code="input_required")
    message = _message(run, f"{question.id}:asks", AGENT, question.question, context_id, code="input_required")
    said: dict[str, Any] = {"id": question.id}
    if question.choices is not None:
        said["choices"] = list(question.choices)
    if question.default is not None:
        said["default"] = question.default
    if question.expires_at is not None:
        expires = Timestamp()
        expires.FromNanoseconds(int(question.expires_at * 1e9))
        said["expiresAt"] = expires.ToJsonString()
    message.metadata.update({a2a_extension.URI: {"question": said}})
    return message


def reply_parts(reply: str) -> list[Part]:
    """The reply artifact's parts: its text whole (one part), then its JSON as a data part when the reply is
    structured output."""
    parts = [Part(text=reply)]
    value = structured(reply)
    if value is not None:
        parts.append(ParseDict({"data": value, "mediaType": "application/json"}, Part()))
    return parts


def structured(reply: str) -> Any:
    """The JSON value of a reply that is one fenced JSON block and nothing else; None for any other reply."""
    found = _STRUCTURED.match(reply)
    if found is None:
        return None
    try:
        return json.loads(found.group("json"))
    except ValueError:
        return None


def file_part(file: Attachment) -> Part:
    part = Part(filename=file.name or "", media_type=file.media_type or "")
    if file.url is not None:
        part.url = file.url
    else:
        part.raw = file.content or b""
    return part


def reply_artifact_id(run: Run) -> str:
    """The reply's artifact: the same id in the Task and in a stream's chunks of it."""
    return f"{run.id}:reply"


def rejected(session_id: str, asked: Message, *, code: str, reason: str) -> Task:
    """A message the policy refused (recorded as a refusal, never as a run): a task that ends where it began."""
    task_id = f"rejected_{uuid.uuid4().hex}"
    answer = Message(
        message_id=f"{task_id}:end",
        context_id=session_id,
        task_id=task_id,
        role=AGENT,
        parts=[Part(text=reason)],
    )
    answer.metadata.update({"code": code})
    task = Task(id=task_id, context_id=session_id, history=[asked])
    task.status.CopyFrom(TaskStatus(state=TaskState.TASK_STATE_REJECTED, message=answer))
    task.status.timestamp.GetCurrentTime()
    return task


def _message(run: Run, message_id: str, role: Role, text: str, context_id: str, *, code: str | None = None) -> Message:
    message = Message(message_id=message_id, context_id=context_id, task_id=run.id, role=role, parts=[Part(text=text)])
    if code is not None:
        message.metadata.update({"code": code})
    return message


def _stamp(when: float) -> Timestamp:
    nanos = int(when * 1e9)
    return Timestamp(seconds=nanos // 1_000_000_000, nanos=nanos % 1_000_000_000)
