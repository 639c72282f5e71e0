"""Per-sender rates: how many new runs one sender may start in a sliding minute, counted in this process (and, by
gateways sharing a store, in the store too: `store.rates`)."""

from __future__ import annotations

import time
from collections import deque

from ...errors import LimitReached

WINDOW_SECONDS = 60.0
MAX_SENDERS = 10_000  # senders remembered at once; the quietest are forgotten first


class SenderRates:
    """A sliding window of event times per sender: `admit` counts a start and raises LimitReached past the cap;
    `retry_after` and `record` let a caller count only some events (the web view's failed logins)."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._starts: dict[str, deque[float]] = {}

    def admit(self, sender: str, *, also: str | None = None) -> None:
        """Count a start for `sender`, or raise LimitReached (rate_limited) when its minute is full (or that
        of `also`, whose count it shares without adding to it: a peer key's, for each of its profiles)."""
        self.check(sender, also=also)
        self.record(sender)

    def check(self, sender: str, *, also: str | None = None) -> None:
        """Raise LimitReached (rate_limited) when the minute of `sender` (or of `also`) is full; count nothing."""
        for who in (sender, also) if also is not None and also != sender else (sender,):
            retry = self.retry_after(who)
            if retry is not None:
                raise self.refusal(who, retry)

    def refusal(self, who: str, retry: float) -> LimitReached:
        """What a sender past its rate is told (`retry` seconds until it may go again)."""
        return LimitReached(
            f"sender {who!r} started {self.per_minute} runs or malformed requests in the last minute"
            f" (gateway.max_runs_per_sender_per_minute is {self.per_minute}); try again in {retry:.0f} s",
            code="rate_limited",
            retry_after=retry,
        )

    def retry_after(self, sender: str) -> float | None:
        """Seconds until `sender` may go again when its minute is full; None when it may go now."""
        now = time.monotonic()
        starts = self._starts.get(sender)
        if not starts:
            return None
        while starts and starts[0] <= now - WINDOW_SECONDS:
            starts.popleft()
        if len(starts) < self.per_minute:
            return None
        return max(1.0, starts[0] + WINDOW_SECONDS - now)

    def record(self, sender: str) -> None:
        """Count one event for `sender` now."""
        starts = self._starts.pop(sender, None) or deque()
        starts.append(time.monotonic())
        self._starts[sender] = starts  # most recently active last
        while len(self._starts) > MAX_SENDERS:
            del self._starts[next(iter(self._starts))]
