"""A run's life as an A2A stream: after the Task, its status updates, the reply's artifact once, closed when it ends.

The live events come from the event hub (what the chat stream follows): `run.started` is WORKING, each reply delta a
WORKING status update whose message is that piece of text (progress, as it comes). The reply itself is one artifact
update at the end, read from the store (`lastChunk: true`, the whole text in one part), then the final status: a
client that joins an artifact's parts with newlines (Hermes's A2A plugin) shows it whole, as does one that adds
them up or applies the SDK's rule. A stream opened on a run this process has no events for (it ran before a
restart) gets from the store what it missed: the Task as it is now, then every change seen while it waits, then the
end.

A run whose turn asks its person (`run.input_required`) is an INPUT_REQUIRED status update with the question. The
stream of a message sent (`until_asked`) closes there, as a blocking send returns there: the caller answers with a
message that names the task. A subscription goes on through it to the task's end. The stream of an answer follows
the resumed run from the answer on (`since`: the events of the turn that asked are not told again).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from a2a.server.events.event_queue import Event
from a2a.types import Message, Part, TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent

from ...core.facades import Messages
from ...events import Asked, Chunk, Ended, Started
from ...records import Question, Run, RunState
from .tasks import AGENT, STATES, task_of

# How often a quiet stream looks at the store (a held message approved, a run ended elsewhere).
LOOK_SECONDS = 1.0


async def updates(
    delivery: Messages,
    run: Run,
    *,
    context_id: str,
    look: float = LOOK_SECONDS,
    until_asked: bool = False,
    since: float | None = None,
    told: TaskState | None = None,
) -> AsyncIterator[Event]:
    """What follows the Task `task_of(run)` in a stream, until the run is terminal (`context_id`: the task's);
    `until_asked`: or until it waits for its person's answer. `since`: events said before then are not told.
    `told`: the state the stream's Task said, when the run may have moved since."""
    shown = _shown(run) if told is None else (told, False)
    if until_asked and run.state is RunState.INPUT_REQUIRED:
        if _shown(run) != shown:
            yield _status(run, context_id, await delivery.asked(run.id))
        return
    pieces = 0  # the reply's pieces told as progress so far
    async for event in delivery.watch(run.id, tick=look):
        when = getattr(event, "timestamp", None)
        if since is not None and when is not None and when < since:
            continue  # the turn before the answer (a resumed run's buffer keeps it)
        if isinstance(event, Ended):
            for ended in _end(await delivery.run(run.id), context_id):
                yield ended
            return
        if isinstance(event, Chunk):
            if event.text:
                pieces += 1
                yield _progress(run, context_id, event.text, pieces, event.timestamp)
            continue
        if event is None or isinstance(event, Started | Asked):
            current = await delivery.run(run.id)  # a quiet moment, the start, a question: did the state move?
            if current.state.terminal:
                continue  # told by `Ended`, after the events before it (a stream that began late replays them)
            if _shown(current) != shown:
                shown = _shown(current)
                asked = await delivery.asked(run.id) if current.state is RunState.INPUT_REQUIRED else None
                yield _status(current, context_id, asked)
            if until_asked and current.state is RunState.INPUT_REQUIRED:
                return


def _shown(run: Run) -> tuple[TaskState, bool]:
    """What a stream has told of a run's state: its task state, and whether it waits for the person."""
    return STATES[run.state], run.state is RunState.HELD


def _status(run: Run, context_id: str, question: Question | None = None) -> TaskStatusUpdateEvent:
    status = TaskStatus()
    status.CopyFrom(task_of(run, context_id=context_id, question=question).status)
    return TaskStatusUpdateEvent(task_id=run.id, context_id=context_id, status=status)


def _progress(run: Run, context_id: str, text: str, n: int, when: float) -> TaskStatusUpdateEvent:
    """A piece of the reply as it comes: a WORKING status update, its message that text (not the artifact); the
    same for every stream of the task (its time the event's)."""
    said = Message(message_id=f"{run.id}:progress:{n}", context_id=context_id, task_id=run.id, role=AGENT)
    said.parts.append(Part(text=text))
    status = TaskStatus(state=TaskState.TASK_STATE_WORKING, message=said)
    status.timestamp.FromNanoseconds(int(when * 1e9))
    return TaskStatusUpdateEvent(task_id=run.id, context_id=context_id, status=status)


def _end(run: Run, context_id: str) -> list[Event]:
    """The run's end as the store has it: its artifacts (the reply, or a partial output), each whole in one
    update, then its status."""
    task = task_of(run, context_id=context_id)
    events: list[Event] = [
        TaskArtifactUpdateEvent(task_id=run.id, context_id=context_id, artifact=artifact, append=False, last_chunk=True)
        for artifact in task.artifacts
    ]
    events.append(_status(run, context_id))
    return events
