"""Runs as A2A tasks: the states mapped, the reply as an artifact and a message, the reason as a status message.

    queued → SUBMITTED      held → SUBMITTED, its status message says it waits for the person's approval
    running → WORKING       completed → COMPLETED (the reply: an artifact and the last message of the history)
    failed, expired → FAILED    cancelled → CANCELED    denied (a held message refused) → REJECTED
A message the policy refuses has no run: it is a REJECTED task of its own, with the refusal code.
"""

from __future__ import annotations

import uuid

from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf.timestamp_pb2 import Timestamp

from ...keys import a2a_message_id
from ...store.runs import RunRow, RunState

# The enum values read once: each `Role.ROLE_USER` is a protobuf wrapper's __getattr__ (~1.5 µs).
USER: Role = Role.ROLE_USER
AGENT: Role = Role.ROLE_AGENT
STATES: dict[RunState, TaskState] = {
    RunState.QUEUED: TaskState.TASK_STATE_SUBMITTED,
    RunState.HELD: TaskState.TASK_STATE_SUBMITTED,
    RunState.RUNNING: TaskState.TASK_STATE_WORKING,
    RunState.COMPLETED: TaskState.TASK_STATE_COMPLETED,
    RunState.FAILED: TaskState.TASK_STATE_FAILED,
    RunState.EXPIRED: TaskState.TASK_STATE_FAILED,
    RunState.CANCELLED: TaskState.TASK_STATE_CANCELED,
    RunState.DENIED: TaskState.TASK_STATE_REJECTED,
}


def task_of(run: RunRow) -> Task:
    """The task a run is: its id the run's, its context the run's session."""
    asked = _message(run, a2a_message_id(run.idempotency_key) or f"{run.id}:in", USER, run.message)
    task = Task(
        id=run.id,
        context_id=run.session_id,
        history=[asked],
        status=TaskStatus(state=STATES[run.state], timestamp=_stamp(run.updated_at)),
    )
    if run.state is RunState.COMPLETED:
        reply = _message(run, f"{run.id}:reply", AGENT, run.reply or "")
        task.artifacts.add(artifact_id=reply_artifact_id(run), name="reply", parts=[Part(text=run.reply or "")])
        task.history.append(reply)
        task.status.message.CopyFrom(reply)
    elif run.state is RunState.HELD:
        text = f"held for the person of {run.profile!r} to approve; the task goes on once they decide"
        task.status.message.CopyFrom(_message(run, f"{run.id}:held", AGENT, text, code="held"))
    elif run.state.terminal:
        said = run.error or run.state.value
        task.status.message.CopyFrom(_message(run, f"{run.id}:end", AGENT, said, code=run.error_code))
        if run.reply:
            task.artifacts.add(artifact_id=f"{run.id}:partial", name="partial output", parts=[Part(text=run.reply)])
    return task


def reply_artifact_id(run: RunRow) -> str:
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


def _message(run: RunRow, message_id: str, role: Role, text: str, *, code: str | None = None) -> Message:
    message = Message(
        message_id=message_id, context_id=run.session_id, task_id=run.id, role=role, parts=[Part(text=text)]
    )
    if code is not None:
        message.metadata.update({"code": code})
    return message


def _stamp(when: float) -> Timestamp:
    nanos = int(when * 1e9)
    return Timestamp(seconds=nanos // 1_000_000_000, nanos=nanos % 1_000_000_000)
