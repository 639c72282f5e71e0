"""Push delivery slots: which owed notifications start now, so that no key's receivers starve another's.

A slot is one POST in flight, held from its start to its end (the push timeouts bound it). The person's configs
(made with the home's API_SERVER_KEY) have slots of their own, `push_person_slots`, that no peer's notification
ever takes: the person's notifications never wait behind a peer's. The peer keys share `push_slots`: a key
holds at most `push_slots_per_key` of them, and each free slot goes to the key with the fewest POSTs in flight
(a tie: the notification due first), so a key whose receivers accept and never answer holds its share while
the other keys' notifications go on through the rest.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Sequence

from .. import addresses
from ..home.push_settings import PushSettings
from ..store.push import Owed


def is_person(owner: str) -> bool:
    """Whether a config's owner is the person (`human:a2a`) rather than a peer key (`peer:NAME`)."""
    return not addresses.is_remote(owner)


class Slots:
    """The POSTs in flight, by owner: `pick` what may start, `hold` what started, `release` what ended."""

    def __init__(self, settings: PushSettings) -> None:
        self.peer_slots = settings.slots
        self.per_key = settings.slots_per_key
        self.person_slots = settings.person_slots
        self._held: dict[int, str] = {}  # config seq -> its owner, while a notification of that config is POSTed

    @property
    def total(self) -> int:
        """How many POSTs may be in flight at once, the person's and the peers'."""
        return self.peer_slots + self.person_slots

    @property
    def per_owner(self) -> int:
        """The most due notifications of one owner worth reading to fill its room: what it may hold in flight."""
        return max(self.per_key, self.person_slots)

    def pick(self, due: Sequence[Owed]) -> list[Owed]:
        """Of `due` (the first due first, at most one per config), those that may start now."""
        waiting = [owed for owed in due if owed.config_seq not in self._held]
        held = Counter(self._held.values())
        person_room = self.person_slots - sum(n for owner, n in held.items() if is_person(owner))
        picked = [owed for owed in waiting if is_person(owed.owner)][: max(person_room, 0)]
        peer_room = self.peer_slots - sum(n for owner, n in held.items() if not is_person(owner))
        queues: dict[str, deque[tuple[int, Owed]]] = {}
        for n, owed in enumerate(waiting):
            if not is_person(owed.owner):
                queues.setdefault(owed.owner, deque()).append((n, owed))
        while peer_room > 0:
            open_ = [owner for owner, queue in queues.items() if queue and held[owner] < self.per_key]
            if not open_:
                break
            owner = min(open_, key=lambda o: (held[o], queues[o][0][0]))  # the fewest in flight, then the first due
            picked.append(queues[owner].popleft()[1])
            held[owner] += 1
            peer_room -= 1
        return picked

    def hold(self, owed: Owed) -> None:
        self._held[owed.config_seq] = owed.owner

    def release(self, config_seq: int) -> None:
        self._held.pop(config_seq, None)
