"""A run's life as an A2A stream: after the Task, its status and artifact updates, closed when it ends.

The live events come from the event hub (what the chat stream follows): `run.started` is WORKING, each
reply delta a chunk of the reply artifact, `append: true` after the first. The end is read from the store,
whatever the hub still holds: the last chunk (`lastChunk: true`) carries what the chunks did not (nothing
when they carried it all), so a client that adds up the parts it is sent has the reply exactly once; then
the final status. Should the reply not begin with what was streamed (a turn that spoke, then called a tool,
then answered), the last chunk replaces the artifact (`append: false`), as A2A's artifact updates allow. A
stream opened on a run this process has no events for (it ran before a restart) gets from the store what it
missed: the Task as it is now, then every change seen while it waits, then the end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from a2a.server.events.event_queue import Event
from a2a.types import Artifact, Part, TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent

from ...core.delivery.delivery import Delivery
from ...core.views import RunState, RunView
from ...states import TERMINAL_EVENTS
from .tasks import STATES, reply_artifact_id, reply_parts, task_of

# How often a quiet stream looks at the store (a held message approved, a run ended elsewhere).
LOOK_SECONDS = 1.0


async def updates(
    delivery: Delivery, run: RunView, *, context_id: str, look: float = LOOK_SECONDS
) -> AsyncIterator[Event]:
    """What follows the Task `task_of(run)` in a stream, until the run is terminal (`context_id`: the task's)."""
    shown = _shown(run)
    streamed: list[str] = []  # the reply's text sent so far, chunk by chunk
    async for event in delivery.follow(run.id, keepalive=look):
        name = None if event is None else str(event["event"])
        if name in TERMINAL_EVENTS:
            for ended in _end(await delivery.run(run.id), context_id, "".join(streamed), chunked=bool(streamed)):
                yield ended
            return
        if name == "message.delta" and event is not None:
            delta = str(event["delta"])
            if not delta:
                continue
            yield TaskArtifactUpdateEvent(
                task_id=run.id,
                context_id=context_id,
                artifact=Artifact(artifact_id=reply_artifact_id(run), name="reply", parts=[Part(text=delta)]),
                append=bool(streamed),
            )
            streamed.append(delta)
            continue
        if name is None or name == "run.started":
            current = await delivery.run(run.id)  # a quiet moment, or the start: did the state move?
            if _shown(current) != shown:
                shown = _shown(current)
                yield _status(current, context_id)


def _shown(run: RunView) -> tuple[TaskState, bool]:
    """What a stream has told of a run's state: its task state, and whether it waits for the person."""
    return STATES[run.state], run.state is RunState.HELD


def _status(run: RunView, context_id: str) -> TaskStatusUpdateEvent:
    status = TaskStatus()
    status.CopyFrom(task_of(run, context_id=context_id).status)
    return TaskStatusUpdateEvent(task_id=run.id, context_id=context_id, status=status)


def _end(run: RunView, context_id: str, streamed: str, *, chunked: bool) -> list[Event]:
    """The run's end as the store has it: the last chunk of its reply (what was not streamed yet) or its other
    artifacts (a partial output), then its status."""
    task = task_of(run, context_id=context_id)
    events: list[Event] = []
    for artifact in task.artifacts:
        append = False
        if chunked and artifact.artifact_id == reply_artifact_id(run) and (run.reply or "").startswith(streamed):
            append = True
            del artifact.parts[:]
            artifact.parts.extend(reply_parts(run.reply or "", text=(run.reply or "")[len(streamed) :]))
        events.append(
            TaskArtifactUpdateEvent(
                task_id=run.id, context_id=context_id, artifact=artifact, append=append, last_chunk=True
            )
        )
    events.append(_status(run, context_id))
    return events
