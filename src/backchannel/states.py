"""The states of a run (DESIGN section 4): the one vocabulary the store records, the core decides on and every
surface shows. A pure module below the store, so that the surfaces name a run's state without the store."""

from __future__ import annotations

from enum import StrEnum


class RunState(StrEnum):
    HELD = "held"  # waiting for the target's person to approve (a hold rule); then queued, or denied/expired
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    DENIED = "denied"  # a held message the person refused

    @property
    def terminal(self) -> bool:
        return self not in (RunState.HELD, RunState.QUEUED, RunState.RUNNING)
