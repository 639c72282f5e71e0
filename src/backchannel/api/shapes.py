"""Response bodies in the Hermes API-server dialect (HERMES-DIALECT.md 2.3-2.6), built in one place."""

from __future__ import annotations

import json
import time
import uuid

from .. import dialect
from ..core.delivery.delivery import Delivered
from ..errors import BackchannelError
from ..outcome import CONSUMED_HEADER, Outcome, detail
from ..records import Run, RunState


def completion(d: Delivered) -> dialect.Completion:
    return {
        "object": "hermes.session.chat.completion",
        "session_id": d.run.session_id,
        "run_id": d.run.id,
        "message": {"role": "assistant", "content": d.run.reply or ""},
        "usage": dialect.usage_of(d.run),
        "replayed": d.result.replayed,
        "landed": d.run.landed,
        "consumed": dialect.consumed_of(d.run),
    }


def queued(d: Delivered) -> dialect.Queued:
    return {
        "object": "hermes.session.chat.queued",
        "session_id": d.run.session_id,
        "status": d.run.state,
        "delivery_id": d.run.id,
        "run_id": d.run.id,
        "queue_position": d.result.queue_position,
        "replayed": d.result.replayed,
        "detail": detail(Outcome.RECEIPT, d.run.state.value),
        "landed": d.run.landed,
    }


def _status_detail(run: Run, ahead: int | None) -> str | None:
    """Why a pending message waits: behind other runs of its session, for a turn slot, its own turn, the person."""
    if run.state is RunState.RUNNING:
        return "running: the message's own turn is under way; delivery pending"
    if run.state is RunState.HELD:
        return "held: waiting for the target's person to approve it"
    if run.state is not RunState.QUEUED:
        return None
    if ahead:
        return f"target_busy: turn slot held by another turn; delivery queued behind {ahead} earlier run(s)"
    return "target_free: turn slot free, delivery queued behind earlier deliveries"


def send_result(d: Delivered, *, profile: str, ahead: int | None = None) -> dialect.SendResult:
    """The 23-key `hermes.peer.send_result` envelope, in its order; `result` is the outcome. `ahead`: how many
    runs of its session go before a queued run (busy only then, not for the message's own running turn)."""
    run, result = d.run, d.result
    status = "delivered" if run.state is RunState.COMPLETED else run.state.value
    receipt = result.outcome in (Outcome.RECEIPT, Outcome.HELD)
    failed = result.outcome in (Outcome.FAILED, Outcome.REFUSED)
    queued_until = run.started_at or (time.time() if run.state is RunState.QUEUED else run.updated_at)
    return {
        "object": "hermes.peer.send_result",
        "result": result.outcome.value,
        "status": status,
        "status_detail": _status_detail(run, ahead),
        "send_id": uuid.uuid4().hex,
        "delivery_id": run.id,
        "idempotency_key": run.given_key,
        "replayed": result.replayed,
        "peer": None,
        "profile": profile,
        "session_id": run.session_id,
        "queue_position": result.queue_position if run.state is RunState.QUEUED else None,
        "attempts": run.attempts,
        "queued_seconds": round(max(0.0, queued_until - run.created_at), 3),
        "waited_seconds": round(result.waited, 3),
        "busy": run.state is RunState.QUEUED and bool(ahead),
        "retryable": False,
        "retry_after_seconds": None,
        "reply": run.reply if result.outcome is Outcome.DELIVERED else None,
        "error": run.error if failed else None,
        "reason": run.error_code if failed else None,
        "detail": detail(result.outcome, run.state.value) if receipt else None,
        "at": int(time.time()),
    }


def consumed_header(run: Run) -> dict[str, str]:
    """The envelope's consumed receipt, as its header (`CONSUMED_HEADER`): none while the run may still be read."""
    if run.consumed is None and not run.state.terminal:
        return {}
    return {CONSUMED_HEADER: json.dumps(dialect.consumed_of(run))}


def refused_result(exc: BackchannelError, *, profile: str, session_id: str | None) -> dialect.SendResult:
    """The envelope of a message our policy refused (nothing was recorded as a run): `result` `refused`."""
    return {
        "object": "hermes.peer.send_result",
        "result": "refused",
        "status": "refused",
        "status_detail": None,
        "send_id": uuid.uuid4().hex,
        "delivery_id": None,
        "idempotency_key": None,
        "replayed": False,
        "peer": None,
        "profile": profile,
        "session_id": session_id,
        "queue_position": None,
        "attempts": 0,
        "queued_seconds": 0.0,
        "waited_seconds": 0.0,
        "busy": False,
        "retryable": False,
        "retry_after_seconds": None,
        "reply": None,
        "error": exc.message,
        "reason": exc.code,
        "detail": "refused by the target's policy: do not resend; change the request or ask the person",
        "at": int(time.time()),
    }
