"""A run's life as an A2A stream: after the Task, its status and artifact updates, closed when it ends.

The live events come from the event hub (what the chat stream follows): `run.started` is WORKING, each
reply delta a chunk of the reply artifact. The end is read from the store, whatever the hub still holds:
the final artifact (the whole reply, replacing the chunks) and the final status. A stream opened on a run
this process has no events for (it ran before a restart) gets from the store what it missed: the Task as
it is now, then every change seen while it waits, then the end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from a2a.server.events.event_queue import Event
from a2a.types import Artifact, Part, TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent

from ...core.delivery import Delivery
from ...core.events import TERMINAL_EVENTS
from ...store.runs import RunRow, RunState
from .tasks import STATES, reply_artifact_id, task_of

# How often a quiet stream looks at the store (a held message approved, a run ended elsewhere).
LOOK_SECONDS = 1.0


async def updates(delivery: Delivery, run: RunRow, *, look: float = LOOK_SECONDS) -> AsyncIterator[Event]:
    """What follows the Task `task_of(run)` in a stream, until the run is terminal."""
    shown = _shown(run)
    chunked = False
    async for event in delivery.follow(run.id, keepalive=look):
        name = None if event is None else str(event["event"])
        if name in TERMINAL_EVENTS:
            for ended in _end(delivery.run(run.id)):
                yield ended
            return
        if name == "message.delta" and event is not None:
            yield TaskArtifactUpdateEvent(
                task_id=run.id,
                context_id=run.session_id,
                artifact=Artifact(artifact_id=reply_artifact_id(run), name="reply", parts=[Part(text=event["delta"])]),
                append=chunked,
            )
            chunked = True
            continue
        if name is None or name == "run.started":
            current = delivery.run(run.id)  # a quiet moment, or the start: did the state move?
            if _shown(current) != shown:
                shown = _shown(current)
                yield _status(current)


def _shown(run: RunRow) -> tuple[TaskState, bool]:
    """What a stream has told of a run's state: its task state, and whether it waits for the person."""
    return STATES[run.state], run.state is RunState.HELD


def _status(run: RunRow) -> TaskStatusUpdateEvent:
    status = TaskStatus()
    status.CopyFrom(task_of(run).status)
    return TaskStatusUpdateEvent(task_id=run.id, context_id=run.session_id, status=status)


def _end(run: RunRow) -> list[Event]:
    """The run's end as the store has it: its artifacts (the reply, or a partial output), then its status."""
    task = task_of(run)
    events: list[Event] = [
        TaskArtifactUpdateEvent(task_id=run.id, context_id=run.session_id, artifact=a, append=False, last_chunk=True)
        for a in task.artifacts
    ]
    events.append(_status(run))
    return events
