"""ListTasks: a caller's A2A tasks in a profile, most recently updated first, a page at a time.

Only what the caller sent over A2A is listed (another caller's tasks never are); the filters are the
spec's: contextId (one the caller started a conversation with, or a session's id), status,
statusTimestampAfter, pageSize (1-100, 50 unless given) with the opaque pageToken of the previous page,
historyLength and includeArtifacts (artifacts left out unless asked).
"""

from __future__ import annotations

import base64
import binascii

from a2a.types import ListTasksRequest, ListTasksResponse, TaskState
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import apply_history_length, validate_history_length, validate_page_size

from ...core.facades import Messages, Roster
from ...records import Run, RunState, TaskQuery
from .tasks import STATES, task_of

DEFAULT_PAGE_SIZE = 50


async def list_tasks(
    delivery: Messages,
    directory: Roster,
    params: ListTasksRequest,
    *,
    profile: str,
    sender: str,
    profiles: bool = False,
) -> ListTasksResponse:
    """One page of `sender`'s A2A tasks in `profile` as `params` asks for it (`profiles`: those it sent as
    `sender/<profile>` too); `sender` is the caller its contexts are bound to."""
    validate_history_length(params)
    size = params.page_size if params.HasField("page_size") else DEFAULT_PAGE_SIZE
    validate_page_size(size)
    states = _states(params.status)
    if states is None:  # a state no run of ours is ever in (input-required, auth-required)
        return ListTasksResponse(page_size=size, total_size=0, next_page_token="")
    query = TaskQuery(
        profile=profile,
        sender=sender,
        sender_profiles=profiles,
        session_id=await _session_of(directory, sender, profile, params.context_id),
        states=states,
        since=_since(params),
        after=decode_token(params.page_token) if params.page_token else None,
    )
    rows, total = await delivery.a2a_tasks(query, limit=size + 1)
    page = rows[:size]
    response = ListTasksResponse(
        page_size=size,
        total_size=total,
        next_page_token=encode_token(page[-1]) if len(rows) > size else "",
    )
    contexts = await directory.context_ids(sender, [run.session_id for run in page])
    files = await delivery.files([run.id for run in page])
    for run in page:
        task = apply_history_length(
            task_of(run, context_id=contexts.get(run.session_id), files=files.get(run.id, ())), params
        )
        if not params.include_artifacts:
            del task.artifacts[:]
        response.tasks.append(task)
    return response


async def _session_of(directory: Roster, caller: str, profile: str, context_id: str) -> str | None:
    """The session a contextId filter names: the conversation the caller started under it, else a session id."""
    if not context_id:
        return None
    bound = await directory.context_session(caller, profile, context_id)
    return bound.id if bound is not None else context_id


def _since(params: ListTasksRequest) -> float | None:
    if not params.HasField("status_timestamp_after"):
        return None
    return float(params.status_timestamp_after.ToNanoseconds()) / 1e9


def _states(status: TaskState) -> tuple[RunState, ...] | None:
    """The run states a task state filter stands for: () for none given, None for one no run is ever in."""
    if status == TaskState.TASK_STATE_UNSPECIFIED:
        return ()
    return tuple(run_state for run_state, task_state in STATES.items() if task_state == status) or None


def encode_token(last: Run) -> str:
    """Where the next page starts: after the last task of this one (its update time, then its order)."""
    return base64.urlsafe_b64encode(f"{last.updated_at!r}|{last.seq}".encode()).decode().rstrip("=")


def decode_token(token: str) -> tuple[float, int]:
    try:
        updated_at, _, seq = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode().partition("|")
        return float(updated_at), int(seq)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidParamsError(
            f"pageToken {token[:80]!r} is not one this server gave: pass a previous answer's nextPageToken",
            {"code": "invalid_page_token"},
        ) from None
