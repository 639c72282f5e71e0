"""Per-sender rates: how many new runs one sender may start in a sliding minute, counted in this process."""

from __future__ import annotations

import time
from collections import deque

from ..errors import LimitReached

WINDOW_SECONDS = 60.0
MAX_SENDERS = 10_000  # senders remembered at once; the quietest are forgotten first


class SenderRates:
    """A sliding window of start times per sender; `admit` raises LimitReached (rate_limited) past the cap."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._starts: dict[str, deque[float]] = {}

    def admit(self, sender: str) -> None:
        now = time.monotonic()
        starts = self._starts.pop(sender, None) or deque()
        while starts and starts[0] <= now - WINDOW_SECONDS:
            starts.popleft()
        self._starts[sender] = starts  # most recently active last
        if len(starts) >= self.per_minute:
            retry = max(1.0, starts[0] + WINDOW_SECONDS - now)
            raise LimitReached(
                f"sender {sender!r} started {len(starts)} runs in the last minute (gateway."
                f"max_runs_per_sender_per_minute is {self.per_minute}); try again in {retry:.0f} s",
                code="rate_limited",
                retry_after=retry,
            )
        starts.append(now)
        while len(self._starts) > MAX_SENDERS:
            del self._starts[next(iter(self._starts))]
