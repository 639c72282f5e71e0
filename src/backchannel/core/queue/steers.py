"""Which sessions may have a message waiting to be steered into their running turn: a running turn looks in the
store for one (a write) only when this says so, so that a turn with nothing steered into it costs nothing more."""

from __future__ import annotations

from ...store.driver import STEER_PREFIX

# The engines whose turns take a steered message at their next model step. A hermes turn is one call to a Hermes
# gateway's session chat, which takes nothing in while it runs: a message to steer into it waits its turn.
STEERABLE_ENGINES = frozenset({"echo", "openai"})


class SteerHints:
    """Sessions a message to steer was recorded for: in this process (`add`), or by another gateway of a shared
    store, whose announcement of it names the session (`heard`). A notice lost while the listener reconnects
    costs only the steer: the message then runs as its session's next turn, as any queued message does."""

    def __init__(self) -> None:
        self._sessions: set[str] = set()

    def add(self, session_id: str) -> None:
        self._sessions.add(session_id)

    def heard(self, payload: str) -> None:
        """Another gateway's announcement of a change: a message to steer marks its session."""
        if payload.startswith(STEER_PREFIX):
            self._sessions.add(payload.removeprefix(STEER_PREFIX))

    def take(self, session_id: str) -> bool:
        """Whether to look for messages to steer into this session's turn now (the hint is used up)."""
        if session_id in self._sessions:
            self._sessions.discard(session_id)
            return True
        return False
