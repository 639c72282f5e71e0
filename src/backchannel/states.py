"""The states of a run (DESIGN section 4): the one vocabulary the store records, the core decides on and every
surface shows. A pure module below the store, so that the surfaces name a run's state without the store."""

from __future__ import annotations

from enum import StrEnum


class RunState(StrEnum):
    HELD = "held"  # waiting for the target's person to approve (a hold rule); then queued, or denied/expired
    QUEUED = "queued"
    RUNNING = "running"
    # Its turn asked its person a question (`ask_person`) and ended there: the run waits for the answer (or the
    # question's default at expiry, or a cancel), which puts it back in its session's queue as `queued`, the same
    # run. Not finished, not worked and not in its session's way: the session's other messages run meanwhile.
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    DENIED = "denied"  # a held message the person refused

    @property
    def terminal(self) -> bool:
        return self not in UNFINISHED


UNFINISHED = (RunState.HELD, RunState.QUEUED, RunState.RUNNING, RunState.INPUT_REQUIRED)  # every state not terminal
