"""Turn slots shared fairly between profiles: one profile's slow turns never take every slot.

At most `total` turns run at once, and at most `per_profile` of them for one profile, so another
profile's turn always finds a slot within one turn's time. A freed slot goes to the waiting profile that
holds the fewest, first come first served among equals.
"""

from __future__ import annotations

import asyncio


class FairSlots:
    """A semaphore with a per-profile cap; `hold(profile)` takes a slot for the block."""

    def __init__(self, total: int, per_profile: int) -> None:
        self.total = max(1, total)
        self.per_profile = max(1, min(per_profile, self.total))
        self._held: dict[str, int] = {}
        self._in_use = 0
        self._waiters: list[tuple[str, asyncio.Future[None]]] = []

    def free_for(self, profile: str) -> bool:
        """Whether a turn of `profile` would get a slot at once."""
        return self._in_use < self.total and self._held.get(profile, 0) < self.per_profile

    def held(self, profile: str) -> int:
        return self._held.get(profile, 0)

    async def acquire(self, profile: str) -> None:
        if self.free_for(profile):
            self._take(profile)
            return
        granted = asyncio.get_running_loop().create_future()
        self._waiters.append((profile, granted))
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.release(profile)  # granted just as it was cancelled: hand it on
            else:
                self._waiters = [(p, f) for p, f in self._waiters if f is not granted]
            raise

    def release(self, profile: str) -> None:
        left = self._held.get(profile, 0) - 1
        if left > 0:
            self._held[profile] = left
        else:
            self._held.pop(profile, None)
        self._in_use -= 1
        self._grant()

    def hold(self, profile: str) -> _Held:
        """A slot of `profile` for an `async with` block (a plain object: it is taken on every turn)."""
        return _Held(self, profile)

    def _take(self, profile: str) -> None:
        self._held[profile] = self._held.get(profile, 0) + 1
        self._in_use += 1

    def _grant(self) -> None:
        while self._waiters and self._in_use < self.total:
            eligible = [
                (self._held.get(p, 0), i) for i, (p, f) in enumerate(self._waiters) if not f.done() and self.free_for(p)
            ]
            if not eligible:
                self._waiters = [(p, f) for p, f in self._waiters if not f.done()]
                return
            _, index = min(eligible)
            profile, granted = self._waiters.pop(index)
            self._take(profile)
            granted.set_result(None)


class _Held:
    """`FairSlots.hold`'s block: the slot taken on entry, given back on leaving however the block ends."""

    __slots__ = ("profile", "slots")

    def __init__(self, slots: FairSlots, profile: str) -> None:
        self.slots = slots
        self.profile = profile

    async def __aenter__(self) -> None:
        await self.slots.acquire(self.profile)

    async def __aexit__(self, *exc: object) -> None:
        self.slots.release(self.profile)
