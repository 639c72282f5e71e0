"""The sessions a gateway has admitted messages to, kept so a message needs no read of its session before its record.

What a message's admission reads of its session is its id, its profile and its title (whether it is the profile's Bot
Chat): the first two never change, and the title only when a removed profile's Bot Chat is set aside. That change is
forgotten here at once in the gateway that makes it, and heard from the others of a shared store on
`SESSIONS_CHANNEL`; an entry is read again after `KEEP_SECONDS` whatever happens, should a notice be lost. Sessions are
never deleted; the record that follows the admission checks the session's row in any case, as it takes its lock.

An entry's counters (`message_count`, `updated_at`) are those of its first read: what shows a session reads it afresh.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from ...records import Session

SESSIONS_CHANNEL = "backchannel_sessions"  # PostgreSQL: a session's title changed (its id the payload)
KEEP_SECONDS = 30.0
MAX_KEPT = 4096


class KnownSessions:
    """Sessions by id, the most recently used kept (at most `MAX_KEPT`), each for `KEEP_SECONDS` at most."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._kept: OrderedDict[str, tuple[Session, float]] = OrderedDict()
        self._clock = clock

    async def get(self, key: str, read: Callable[[], Awaitable[Session | None]]) -> Session | None:
        """The session under `key` (its id, or `bot_chat_key(profile)`), kept from an earlier `read` or read now
        (None, or its NotFound, is not kept)."""
        now = self._clock()
        kept = self._kept.get(key)
        if kept is not None and now - kept[1] < KEEP_SECONDS:
            self._kept.move_to_end(key)
            return kept[0]
        session = await read()
        if session is None:
            return None
        self._kept[key] = (session, now)
        self._kept.move_to_end(key)
        while len(self._kept) > MAX_KEPT:
            self._kept.popitem(last=False)
        return session

    def forget(self, key: str) -> None:
        """The session changed (here, or another gateway said so): read it again next time."""
        self._kept.pop(key, None)


def bot_chat_key(profile: str) -> str:
    """The key a profile's Bot Chat is kept under, beside its id (a profile's name has no `:`)."""
    return f"bot-chat:{profile}"
