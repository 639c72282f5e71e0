"""Response bodies in the Hermes API-server dialect (HERMES-DIALECT.md 2.3-2.6), built in one place."""

from __future__ import annotations

import time
import uuid
from typing import Any

from ..core.directory import Delivery
from ..store.runs import RunRow, RunState
from ..store.sessions import SessionRow

RECEIPT_DETAIL = "accepted and queued: do not resend; the reply will be kept on the run and in the session"


def session(row: SessionRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "profile": row.profile,
        "source": row.source,
        "title": row.title,
        "started_at": row.created_at,
        "last_active": row.updated_at,
        "message_count": row.message_count,
        "ended_at": None,
        "hidden": False,
        "archived": False,
    }


def run(row: RunRow, queue_position: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "object": "hermes.run",
        "run_id": row.id,
        "status": row.state.value,
        "session_id": row.session_id,
        "profile": row.profile,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "started_at": row.started_at,
        "finished_at": row.finished_at,
        "attempts": row.attempts,
        "hops": row.hops,
    }
    if row.reply is not None:
        body["output"] = row.reply
    if row.error is not None:
        body["error"] = row.error
        body["code"] = row.error_code
    if queue_position is not None:
        body["queue_position"] = queue_position
    return body


def completion(d: Delivery) -> dict[str, Any]:
    return {
        "object": "hermes.session.chat.completion",
        "session_id": d.run.session_id,
        "run_id": d.run.id,
        "message": {"role": "assistant", "content": d.run.reply or ""},
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
        "replayed": d.replayed,
    }


def queued(d: Delivery) -> dict[str, Any]:
    return {
        "object": "hermes.session.chat.queued",
        "session_id": d.run.session_id,
        "status": d.run.state.value,
        "delivery_id": d.run.id,
        "run_id": d.run.id,
        "queue_position": d.queue_position,
        "replayed": d.replayed,
        "detail": RECEIPT_DETAIL,
    }


_STATUS = {
    RunState.QUEUED: "queued",
    RunState.RUNNING: "running",
    RunState.COMPLETED: "delivered",
    RunState.FAILED: "failed",
    RunState.CANCELLED: "cancelled",
    RunState.EXPIRED: "expired",
}
_RESULT = {
    "queued": "receipt",
    "running": "receipt",
    "delivered": "delivered",
    "failed": "failed",
    "cancelled": "failed",
    "expired": "failed",
}


def send_result(d: Delivery, *, profile: str) -> dict[str, Any]:
    """The 23-key `hermes.peer.send_result` envelope, in its order."""
    status = _STATUS[d.run.state]
    result = _RESULT[status]
    queued_until = d.run.started_at or (time.time() if d.run.state is RunState.QUEUED else d.run.updated_at)
    return {
        "object": "hermes.peer.send_result",
        "result": result,
        "status": status,
        "status_detail": "target_busy: turn slot held by another turn; delivery queued"
        if result == "receipt"
        else None,
        "send_id": uuid.uuid4().hex,
        "delivery_id": d.run.id,
        "idempotency_key": d.run.idempotency_key,
        "replayed": d.replayed,
        "peer": None,
        "profile": profile,
        "session_id": d.run.session_id,
        "queue_position": d.queue_position if status == "queued" else None,
        "attempts": d.run.attempts,
        "queued_seconds": round(max(0.0, queued_until - d.run.created_at), 3),
        "waited_seconds": round(d.waited, 3),
        "busy": result == "receipt",
        "retryable": False,
        "retry_after_seconds": None,
        "reply": d.run.reply if result == "delivered" else None,
        "error": d.run.error if result == "failed" else None,
        "reason": d.run.error_code if result == "failed" else None,
        "detail": RECEIPT_DETAIL if result == "receipt" else None,
        "at": int(time.time()),
    }


def terminal_event(row: RunRow) -> dict[str, Any]:
    """The closing event of a run read from the store (its live events are gone or elsewhere)."""
    event: dict[str, Any] = {
        "event": f"run.{row.state.value}",
        "run_id": row.id,
        "timestamp": row.updated_at,
        "session_id": row.session_id,
    }
    if row.state is RunState.COMPLETED:
        event["output"] = row.reply or ""
    else:
        event.update(error=row.error, code=row.error_code, output=row.reply)
    return event
