"""What a push notification says: its body, built when it is delivered from its run as the run was when it was owed.

The outbox keeps no body (a reply in it was copied into each artifact and status notification of every
config, and kept a day): each row names its task (through its config), its event key, and what the run was
when the notification was owed, `Told` — its state and its `updated_at`, the status's timestamp. The body is
built at delivery from the run read then, with that state and that time (`as_told`):

- a run's message never changes once recorded, and its reply and error never change once it has ended;
- a state before the end shows neither (nor anything else the run has gained since), so a notification owed
  as `working` says `working`, with the time it began, even when the run has completed meanwhile;
- retention (`store.keep_days`) leaves the text of a run whose notifications are still owed.

So each notification keeps its meaning, and every attempt at it — after a restart too — sends the same bytes,
which its signature (`X-A2A-Signature`) is over. Two things alone could change a body between attempts: a new
`push_max_body_bytes` (a body past it is shortened) and a Backchannel that renders differently. A notification
queued before migration 0018 keeps the body it was queued with, sent as it is.

A run waiting for its person's answer (`input_required`) is told with the question it asked last (its status
message, for A2A), read at delivery too.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from ..records import Question, Run, RunState
from ..store import questions as questionstore
from ..store import runs as runstore
from ..store.driver import Db
from ..store.push import Owed, Told


class PushEvents(Protocol):
    """What a receiver is told of a run as it is now: (event key, body) pairs, the key unique per task, in the
    shape of the protocol `version` its config was made in."""

    def events(
        self, run: Run, *, version: str, max_bytes: int, question: Question | None = None
    ) -> list[tuple[str, bytes]]: ...


def told(run: Run) -> Told:
    """What a notification owed now tells of `run`."""
    return Told(run.state, run.updated_at)


def as_told(run: Run, told: Told) -> Run:
    """`run` as it was when a notification telling `told` was owed: its state and time then; before its end
    without a reply, an error or an end."""
    if told.state.terminal:
        return replace(run, state=told.state, updated_at=told.at)
    return replace(run, state=told.state, updated_at=told.at, reply=None, error=None, error_code=None, finished_at=None)


class Bodies:
    """The body of each notification, built from its run when it is delivered."""

    def __init__(self, db: Db, events: PushEvents, *, max_bytes: int) -> None:
        self.db = db
        self._events = events
        self.max_bytes = max_bytes

    async def body(self, owed: Owed) -> bytes | None:
        """The bytes `owed` sends (None: its run no longer makes its event, a new push_max_body_bytes leaving out
        the artifact it was)."""
        if owed.told is None:
            return owed.body  # queued before bodies were built at delivery: as it was rendered then
        run = as_told(await runstore.get(self.db, owed.task_id), owed.told)
        asked = await questionstore.last_of(self.db, run.id) if run.state is RunState.INPUT_REQUIRED else None
        for key, body in self._events.events(run, version=owed.version, max_bytes=self.max_bytes, question=asked):
            if key == owed.event_key:
                return body
        return None
