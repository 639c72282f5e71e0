"""Wake on reply: the outcome of a message delivered into the session of the agent that stopped waiting.

One path for every kind of end (a reply, a failure, an expiry, a cancellation, a peer's late answer):
a run in the sender's session, keyed once per message, admitted like every message, where the policy's
reply rule lets it through (a reply to a message we sent is never subject to our own accept list).
"""

from __future__ import annotations

import logging

from ... import keys, tracing
from ...errors import BackchannelError
from ...framing import question_heading, reply_heading
from ...outcome import NOT_CONSUMED
from ...records import Run
from ...store.runs import RunState
from .admission import Admission, Attempt

log = logging.getLogger("backchannel.wakes")
MAX_ERROR_CHARS = 2000  # of a failure's reason in a wake-up (a deny's reason, a peer's error): what an agent reads


class Wakes:
    """Delivers outcomes into the sessions of senders that stopped waiting."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission

    async def of_run(self, run: Run) -> bool:
        """A local run ended after its sender stopped waiting: False when its wake could not be queued now."""
        if not (run.wake and run.sender_session and run.state.terminal):
            return True
        unread = f" ({NOT_CONSUMED})" if run.consumed is None else ""  # it may be asked again
        if run.state is RunState.COMPLETED and run.reply and not unread:
            text = reply_text(run.id, run.message, run.reply)
        elif run.state is RunState.COMPLETED and run.reply:  # a steer its turn took in after its last model call
            text = reply_text(run.id, run.message, f"{NOT_CONSUMED}; the turn it joined answered:\n{run.reply}")
        else:
            ended = "(no reply)" if run.state is RunState.COMPLETED else failure_text(run.state.value, run.error)
            text = reply_text(run.id, run.message, ended + unread, ours=True)
        woken = await self.deliver(
            session_id=run.sender_session,
            text=text,
            sender=f"{run.profile}/{run.session_id}",
            key=keys.wake(run.id),
            hops=run.hops + 1,
            exchange=run.origin,
            trace=tracing.kept(run.trace_span or run.traceparent, run.tracestate),  # continues the run's span
        )
        return woken is not None

    async def deliver(
        self,
        *,
        session_id: str,
        text: str,
        sender: str,
        key: str,
        hops: int,
        exchange: str | None,
        trace: tracing.Carrier | None = None,
    ) -> Run | None:
        """Queue the wake-up run; None when it cannot be delivered now (the caller tries again later).

        Past the session's queue cap: the sender asked for this answer, and there is one per message."""
        try:
            session = await self.admission.directory.session(session_id)
            admitted = await self.admission.admit(
                Attempt(
                    kind="reply",
                    sender=sender,
                    text=text,
                    session=session,
                    key=key,
                    hops=hops,
                    exchange=exchange,
                    trace=trace,
                )
            )
            return admitted.run
        except BackchannelError as exc:
            log.warning("reply %s not yet delivered to session %s: %s", key, session_id, exc.message)
            return None


def reply_text(run_id: str, message: str, outcome: str, *, ours: bool = False) -> str:
    """The text a woken sender reads: which of its messages this answers (our own heading line, shown to its
    model as it is), then the reply on the lines after it (escaped like any other agent's text). An outcome of
    our own (`ours`: a failure, no reply) is one line and goes on the heading's line, shown as it is too."""
    return f"{reply_heading(run_id, message)}{' ' if ours else chr(10)}{outcome}"


def question_text(run_id: str, message: str, question: str) -> str:
    """The text an agent woken by a peer's question reads: our heading (which message, how to answer), then the
    question on the lines after it (escaped like any other agent's text)."""
    return f"{question_heading(run_id, message)}\n{question}"


def failure_text(state: str, error: str | None) -> str:
    """A failed end as a wake-up says it, `(state: why)` on one line; a reason past MAX_ERROR_CHARS is cut (a
    deny's reason or a peer's error is not pasted whole into the sender's session)."""
    why = " ".join((error or "no reply").split())  # one line: it goes on the heading's line
    if len(why) > MAX_ERROR_CHARS:
        why = f"{why[:MAX_ERROR_CHARS]}… ({len(why) - MAX_ERROR_CHARS} more characters not shown)"
    return f"({state}: {why})"
