"""Which conversation an A2A message joins: the caller's own contextId, a session's id, or the Bot Chat.

    no contextId, from the person     the profile's Bot Chat (its session id is the task's contextId)
    no contextId, from a peer's key   that key's own conversation with the profile: contextId `own`, bound to
                                      (caller, `own`) as a contextId the caller chose would be (two keys, two
                                      conversations; one key's messages without contextId, always the same)
    `bot-chat`                        the profile's Bot Chat, for any caller the profile accepts (its
                                      session id is the task's contextId, which names it too)
    a contextId this caller started   that conversation's session, the task's contextId the caller's own
    a session id of the profile       that session, if the key reaches it (a peer's: the Bot Chat only)
    any other contextId               a new session of the profile, bound to (caller, contextId) once the
                                      message is accepted; another caller's same contextId is another one
A message with a taskId follows up that task: unknown (or another caller's) is TaskNotFound, a contextId
that is not the task's is refused; a task waiting for its person's answer (INPUT_REQUIRED) takes the message as
that answer (`answers`), any other takes no message of its own (UnsupportedOperation).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from a2a.types import Message, TaskState
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError

from ...core.access import Caller
from ...core.delivery.delivery import NewContext
from ...core.facades import Roster
from ...errors import NotFound
from ...records import Run, Session
from .tasks import STATES

MAX_CONTEXT_ID_CHARS = 255
OWN_CONTEXT = "own"  # the contextId of a peer key's conversation when it sends none
BOT_CHAT_CONTEXT = "bot-chat"  # the contextId that names the profile's Bot Chat


@dataclass(frozen=True)
class Conversation:
    """The session a message goes to, what the caller calls it (`context_id`), and, for a new one, the binding
    the delivery service writes once the message is accepted."""

    session: Session
    context_id: str
    new: NewContext | None = None


async def conversation(directory: Roster, who: Caller, caller: str, profile: str, context_id: str) -> Conversation:
    """Where a message of `who` (known in bindings as `caller`) with `context_id` goes in `profile`."""
    if (not context_id and who.is_person) or context_id == BOT_CHAT_CONTEXT:
        session = await directory.open_bot_chat(profile)
        return Conversation(session, session.id)
    context_id = context_id or OWN_CONTEXT
    check_context_id(context_id)
    bound = await directory.context_session(caller, profile, context_id)
    if bound is not None:
        return Conversation(bound, context_id)
    try:
        session = await directory.known(context_id, profile=profile)
    except NotFound:
        return Conversation(directory.unsaved_session(profile), context_id, NewContext(caller, context_id))
    return Conversation(who.require_bot_chat(session), context_id)


async def context_of(directory: Roster, caller: str, run: Run) -> str:
    """The contextId `caller` knows a run's session by: its own, or the session's id."""
    return (await directory.context_ids(caller, [run.session_id])).get(run.session_id, run.session_id)


def check_context(message: Message, run: Run, context_id: str) -> None:
    """A message that names the caller's task `run` (known by `context_id`) names no other contextId."""
    if message.context_id and message.context_id != context_id:
        raise InvalidParamsError(
            f"contextId {message.context_id[:MAX_CONTEXT_ID_CHARS]!r} is not that of task {run.id!r}"
            f" ({context_id!r}): leave it out, or send the task's",
            {"code": "context_mismatch"},
        )


def refuse_follow_up(message: Message, run: Run, context_id: str) -> None:
    """A message that names the caller's task `run` (known by `context_id`) that waits for no answer: refused,
    saying why."""
    check_context(message, run, context_id)
    state = TaskState.Name(STATES[run.state])
    if run.state.terminal:
        raise UnsupportedOperationError(
            f"task {run.id!r} has ended ({state}): it takes no more messages; send a new message with contextId"
            f" {context_id!r} (no taskId) to go on in its conversation",
            {"code": "task_ended"},
        )
    raise UnsupportedOperationError(
        f"task {run.id!r} is still going ({state}) and takes no message of its own; follow it (SubscribeToTask,"
        f" GetTask), then send a new message with contextId {context_id!r} (no taskId)",
        {"code": "task_running"},
    )


def check_context_id(context_id: str) -> None:
    if len(context_id) > MAX_CONTEXT_ID_CHARS or any(unicodedata.category(c).startswith("C") for c in context_id):
        raise InvalidParamsError(
            f"a contextId has at most {MAX_CONTEXT_ID_CHARS} characters and no line breaks or control characters"
            f" (this one has {len(context_id)})",
            {"code": "invalid_context_id"},
        )
