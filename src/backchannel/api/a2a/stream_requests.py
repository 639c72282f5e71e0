"""Which A2A requests open a stream, and the task each follows: what the stream caps count before the SDK is
handed the request (SendStreamingMessage accepts its message before it answers, so a refusal comes first).

JSON-RPC: `SendStreamingMessage` and `SubscribeToTask` (0.3: `message/stream`, `tasks/resubscribe`); HTTP+JSON:
`POST …/message:stream` and `…/tasks/{id}:subscribe`, with 0.3's `/v1` or a tenant before them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

MAX_TASK_ID = 200  # characters of a task id counted as given (longer: no run has it, the stream fails anyway)
SENDS = frozenset({"SendStreamingMessage", "message/stream"})
SUBSCRIBES = frozenset({"SubscribeToTask", "tasks/resubscribe"})
_REST_SEND = re.compile(r"(?:^|/)message:stream$")
_REST_SUBSCRIBE = re.compile(r"(?:^|/)tasks/([^/]+):subscribe$")


@dataclass(frozen=True)
class Opening:
    """A request that opens a stream: following the task `task_id`, or a task it makes (None)."""

    task_id: str | None = None


def of_jsonrpc(parsed: Any) -> Opening | None:
    """The stream a JSON-RPC request opens (None: it opens none)."""
    method = parsed.get("method") if isinstance(parsed, dict) else None
    if method in SENDS:
        return Opening()
    if method in SUBSCRIBES:
        params = parsed.get("params")
        task_id = params.get("id") if isinstance(params, dict) else None
        return Opening(task_id[:MAX_TASK_ID] if isinstance(task_id, str) and task_id else None)
    return None


def of_rest(method: str, path: str) -> Opening | None:
    """The stream an HTTP+JSON request (`method` on `path`, what follows `…/a2a/rest`) opens (None: none)."""
    if method == "POST" and _REST_SEND.search(path):
        return Opening()
    found = _REST_SUBSCRIBE.search(path)
    if found is not None and method in ("GET", "POST"):
        return Opening(found.group(1)[:MAX_TASK_ID])
    return None
