"""A run's state as push notification bodies, in the shape the config's caller speaks.

1.0 (§4.3.3): a StreamResponse, what a stream of the task would carry:

    queued, held, running          {"statusUpdate": …}                           keyed status:<state>
    input_required                 {"statusUpdate": …}, its message the question status:input_required
    completed, failed, cancelled … {"artifactUpdate": …} per artifact (the reply; a partial output), lastChunk,
                                   then {"statusUpdate": …}                       artifact:<id>:<state>, status:<state>

0.3 (a config made by a 0.3 client, as its SDK's sender posts): the Task as it is, one per state (task:<state>).

Each body is JSON with sorted keys (`json.dumps(…, sort_keys=True, ensure_ascii=False)`): the bytes signed are
the bytes a receiver gets, and a receiver that signs the parsed body again that way gets them too. A body
past the bound is not sent as it is: an artifact is left out, and the status (a 0.3 Task: without its
artifacts and history) says to read the task with GetTask.
"""

from __future__ import annotations

import json
from typing import Any

from a2a.compat.v0_3.conversions import to_compat_task
from a2a.types import Message, Part, Task, TaskArtifactUpdateEvent, TaskStatus, TaskStatusUpdateEvent
from a2a.utils.proto_utils import to_stream_response
from google.protobuf.json_format import MessageToDict

from ...records import Question, Run
from .tasks import AGENT, task_of

TOO_LONG = "(too long for a push notification: read the task with GetTask)"


def events(run: Run, *, version: str, max_bytes: int, question: Question | None = None) -> list[tuple[str, bytes]]:
    """(key, body) of each notification the run's state as it is now makes, in the order they are sent
    (`question`: the one a run `input_required` asked)."""
    task = task_of(run, question=question)
    if version.startswith("0."):
        return [(f"task:{run.state.value}", _task_03(run, task, max_bytes))]
    made: list[tuple[str, bytes]] = []
    if run.state.terminal:
        for artifact in task.artifacts:
            update = TaskArtifactUpdateEvent(
                task_id=run.id, context_id=run.session_id, artifact=artifact, append=False, last_chunk=True
            )
            body = _dumped(MessageToDict(to_stream_response(update)))
            if len(body) <= max_bytes:
                made.append((f"artifact:{artifact.artifact_id}:{run.state.value}", body))
    status = TaskStatusUpdateEvent(task_id=run.id, context_id=run.session_id, status=task.status)
    body = _dumped(MessageToDict(to_stream_response(status)))
    if len(body) > max_bytes:
        _shorten(run, status.status)
        body = _dumped(MessageToDict(to_stream_response(status)))
    made.append((f"status:{run.state.value}", body))
    return made


def _task_03(run: Run, task: Task, max_bytes: int) -> bytes:
    body = _dumped(to_compat_task(task).model_dump(mode="json", by_alias=True, exclude_none=True))
    if len(body) <= max_bytes:
        return body
    del task.artifacts[:]
    del task.history[:]
    _shorten(run, task.status)
    return _dumped(to_compat_task(task).model_dump(mode="json", by_alias=True, exclude_none=True))


def _shorten(run: Run, status: TaskStatus) -> None:
    """The status says what it could not carry, instead of the reply."""
    note = Message(
        message_id=f"{run.id}:{run.state.value}:too-long",
        context_id=run.session_id,
        task_id=run.id,
        role=AGENT,
        parts=[Part(text=TOO_LONG)],
    )
    note.metadata.update({"code": "too_long"})
    status.message.CopyFrom(note)


def _dumped(shaped: Any) -> bytes:
    return json.dumps(shaped, sort_keys=True, ensure_ascii=False).encode("utf-8")
