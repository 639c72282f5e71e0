"""The span of each run, `invoke_agent <profile>`: begun when its turn starts (backdated to when the message
came, its hold and its wait drawn inside it), ended with the run; a run that ends without a turn here (stopped
while it waited, its hold denied or expired, steered into another turn) gets its span whole at its end.

Its parent is the context kept with the run (what caused it: a caller's request, the tool call of the turn that
sent it, the run whose reply wakes it), so a turn run again after a restart continues the same trace.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ... import keys, tracing
from ...outcome import of_state
from ...records import Run
from ...store.runs import RunState

if TYPE_CHECKING:
    from opentelemetry.trace import Span


class RunSpans:
    """The spans of the runs whose turns run in this process, by run id (empty while tracing is off)."""

    def __init__(self) -> None:
        self._live: dict[str, Span] = {}

    def begin(self, run: Run) -> Span | None:
        """The span of `run`'s turn, begun at the message's arrival (None when tracing is off)."""
        if not tracing.active():
            return None
        span = _started(run)
        with tracing.current(span):
            _waits(run, until=run.started_at or time.time())
        self._live[run.id] = span
        return span

    def carrier(self, run_id: str) -> str | None:
        """The traceparent of the span of `run_id`'s turn running here (kept with its end: its wake continues it)."""
        span = self._live.get(run_id)
        carried = tracing.carrier_of(span) if span is not None else None
        return carried.traceparent if carried is not None else None

    def cut(self, run_id: str, why: str, *, code: str) -> None:
        """The turn of `run_id` ended without its run (it runs again): its span ends as an error of `code`, saying
        `why` with traces.content."""
        span = self._live.pop(run_id, None)
        if span is not None:
            tracing.end(span, error=why, code=code, attributes={"backchannel.state": "requeued"})

    def end(self, run: Run) -> None:
        """`run` ended (its end saved): its span ends with what it came to."""
        span = self._live.pop(run.id, None)
        if span is None:
            if not tracing.active():
                return
            span = _started(run)
            if run.started_at is None:
                with tracing.current(span):
                    _waits(run, until=run.finished_at or time.time())
        bad = run.state is not RunState.COMPLETED
        tracing.end(
            span,
            at=run.finished_at,
            error=(run.error or run.state.value) if bad else None,
            code=(run.error_code or run.state.value) if bad else None,
            attributes={
                "backchannel.outcome": of_state(run.state).value,
                "backchannel.state": run.state.value if bad else None,  # completed: the outcome says it
                "backchannel.steered_into": run.steered_into,
                "gen_ai.usage.input_tokens": run.tokens_in,
                "gen_ai.usage.output_tokens": run.tokens_out,
                "backchannel.cost_usd": run.cost_usd or None,
                "backchannel.reply": tracing.content(run.reply),
            },
        )


def _started(run: Run) -> Span:
    """`invoke_agent <profile>`, begun when the message came, under the context kept with the run."""
    return tracing.start(
        f"invoke_agent {run.profile}",
        kind=_kind(run),
        attributes=_attributes(run),
        parent=tracing.parse(run.traceparent, run.tracestate),
        at=run.created_at,
    )


def _kind(run: Run) -> str:
    """SERVER for a message that came from outside (a person, a peer), INTERNAL for one of an agent here."""
    if keys.is_wake(run.idempotency_key):
        return "internal"
    return "server" if run.sender.startswith(("human:", "peer:")) else "internal"


def _attributes(run: Run) -> dict[str, Any]:
    """A run's span's attributes as it begins; those that say nothing here are left out (each costs a span
    a few microseconds): an empty chain, an exchange that is the run itself, a first attempt."""
    return {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": run.profile,
        "gen_ai.conversation.id": run.session_id,
        "backchannel.run_id": run.id,
        "backchannel.sender": run.sender,
        "backchannel.hops": run.hops,
        "backchannel.chain": list(run.chain) if run.chain else None,
        "backchannel.exchange": run.origin if run.origin != run.id else None,
        "backchannel.landed": run.landed or "held",
        "backchannel.attempt": run.attempts if run.attempts > 1 else None,
        "backchannel.message": tracing.content(run.message),
    }


def _waits(run: Run, *, until: float) -> None:
    """The time `run` spent held for the person and then waiting in its session's queue, as spans of their own
    under the current one (a turn run again after a restart draws no wait: its time went to the attempt before)."""
    if run.attempts > 1:
        return
    waited_from = run.created_at
    if run.released_at is not None or run.landed is None:  # it was held
        released = run.released_at or until
        tracing.whole(
            "backchannel.held",
            start_at=run.created_at,
            end_at=released,
            attributes={"backchannel.run_id": run.id, "backchannel.released": run.released_at is not None},
        )
        waited_from = released
    if until > waited_from and run.landed != "started":  # one that started at its record waited in no queue
        tracing.whole(
            "backchannel.queue_wait",
            start_at=waited_from,
            end_at=until,
            attributes={"backchannel.run_id": run.id, "backchannel.landed": run.landed or "held"},
        )
