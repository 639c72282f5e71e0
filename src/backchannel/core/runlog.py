"""The run log: one line per run state change on stderr, in the logging format, cheap enough for every turn."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from ..records import Run
from ..store.runs import RunState


class RunLog:
    """One line per run state change on stderr, in the logging format, cheap enough for every turn.

    Written straight to the (line-buffered) stream: the logging machinery cost more than the turn.
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._second = -1
        self._stamp = ""

    def __call__(self, run: Run, state: RunState) -> None:
        now = time.time()
        if int(now) != self._second:
            self._second = int(now)
            self._stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        detail = f" ({run.error_code}: {run.error})" if run.error and state is run.state else ""
        attempt = run.attempts if state is run.state else 0
        (self._stream or sys.stderr).write(
            f"{self._stamp},{int(now * 1000) % 1000:03d} backchannel.gateway run {run.id} {state.value} "
            f"session={run.session_id} profile={run.profile} sender={run.sender} hops={run.hops} "
            f"attempt={attempt}{detail}\n"
        )
