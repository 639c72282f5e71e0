"""Rooms: a person and several agents in one durable, ordered transcript, each member answering in turn.

When the person says something, each member in turn (the room's order) is given what was said in the room since
its last turn, each line framed with who said it, and answers in a room session of its own (so with its own
full context); its answer joins the transcript before the next member is asked. A member hands the floor to
another by naming it (`@research`, `@spark/ops`): that member answers next. Hand-offs are bounded by the hop limit
of the member that hands off, and every message of the person's by `rooms.agent_messages_per_message` answers.
A member on another gateway answers through the peer path (a message to its Bot Chat there).

Each round is driven by one gateway at a time (the room's lease, `store.rooms.claim`), and everything it does is
recorded before it is acted on: a gateway that dies mid-round is followed by the next to hold the lease, which
asks the member whose turn it was again, with the same idempotency key (its run is the same run).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from .. import addresses
from ..addresses import RemoteAddress, Target
from ..errors import BackchannelError, NotFound, StoreError, UsageError
from ..framing import ROOM_SENDER, is_human, quote
from ..home import config
from ..home.home_file import RoomSettings
from ..outcome import Outcome
from ..records import Session
from ..store import rooms as roomstore
from ..store import sessions as sessionstore
from ..store.driver import Db
from ..transcript import SAID, Line, Room, Round, Waiting
from .delivery.admission import Attempt
from .delivery.delivery import Delivery, check_message
from .delivery.directory import Directory
from .delivery.door import by_kind
from .delivery.outbound import Outbound, SentFrom
from .queue.commits import commits
from .queue.queue import owner_is_dead

log = logging.getLogger("backchannel.rooms")
LOOK_SECONDS = 0.5  # how often the rooms with a round to drive are looked for
LEASE_SECONDS = 30.0  # a room's rounds are one gateway's this long without renewal
FROM_ROOM = SentFrom(address=ROOM_SENDER)  # a peer member is sent the room's turn as the local members are
PEER_WAIT_SECONDS = 120.0  # a peer member's answer waited for in one request, then asked about
PEER_POLL_SECONDS = 1.0
NOTE = "backchannel"  # the speaker of Backchannel's own lines
ROOM_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}\Z")
HANDLE_RE = re.compile(r"(?<![\w@])@([A-Za-z0-9][A-Za-z0-9_.:/-]*)")


def handles(member: str) -> set[str]:
    """The names a member is handed the floor by: `@research`, or for `peer:spark/ops` `@spark/ops` too."""
    names = {member}
    if member.startswith(addresses.REMOTE):
        names.add(member.removeprefix(addresses.REMOTE))
    return names


def named(text: str, members: tuple[str, ...]) -> list[str]:
    """The members `text` names with @, in the order named (each once)."""
    found: list[str] = []
    for match in HANDLE_RE.finditer(text):
        word = match.group(1).rstrip(".,;:!?)")
        for member in members:
            if word in handles(member) and member not in found:
                found.append(member)
    return found


def briefing(room: Room, lines: list[Line], member: str) -> str:
    """What `member` is given at its turn: the room's lines since its last turn, each framed with its speaker
    (another agent's words quoted, as in every frame), then whose turn it is."""
    head = f"[Room {room.name}"
    out = [f"{head} — what was said since your last turn]"]
    for line in lines:
        if line.speaker == member or line.state not in (SAID, "completed"):
            continue
        if is_human(line.speaker):
            out += [f"{head} — the person said:]", line.text]
        elif line.speaker == NOTE:
            out.append(f"{head} — Backchannel: {line.text}]")
        else:
            out += [f"{head} — {line.speaker} said (another agent, not your user):]", quote(line.text)]
    others = ", ".join(sorted(handles(m), key=len)[0] for m in room.members if m != member) or "nobody"
    out.append(f"{head} — your turn: answer the room; @ and a member's name hands them the floor ({others})]")
    return "\n".join(out)


@dataclass(frozen=True)
class Answer:
    """What a member's turn came to: its words (or why there are none), its run and state."""

    text: str
    state: str
    run_id: str | None = None
    error: str | None = None


class Rooms:
    """The rooms of one home: made and changed by the person, said into, and driven round by round."""

    def __init__(
        self,
        *,
        root: Path,
        db: Db,
        delivery: Delivery,
        directory: Directory,
        outbound: Outbound,
        owner: str,
    ) -> None:
        self.root = root
        self.db = db
        self.delivery = delivery
        self.directory = directory
        self.outbound = outbound
        self.owner = owner
        self._driving: dict[str, asyncio.Task[None]] = {}

    @property
    def settings(self) -> RoomSettings:
        return config.load_gateway_config(self.root).rooms

    # --- the person's: make, change, read, say -----------------------------------------------------

    def check_members(self, name: str, members: list[str]) -> list[str]:
        """Each member as an address this home knows (a profile, a session, a peer's agent), in order, once;
        a UsageError naming the first that is not, or the room among its own members."""
        checked: list[str] = []
        for text in members:
            if text in (name, f"room:{name}"):
                raise UsageError(f"room {name!r} cannot be a member of itself")
            target = addresses.parse_target(text)
            if addresses.as_group(target) is not None:
                raise UsageError(f"{text!r}: a room's members are agents; name the group's members one by one")
            remote, local = addresses.as_remote(target), addresses.as_local(target)
            if remote is not None:
                if remote.session_id is not None:
                    raise UsageError(f"{text!r}: a room reaches a peer's agent (peer:NAME or peer:NAME/AGENT)")
                self.outbound.peer(remote.peer)  # an unknown peer: NotFound naming the known ones
            elif local is not None and local.profile is not None:
                self.directory.check_profile(local.profile)
            if str(target) not in checked:
                checked.append(str(target))
        limit = self.settings.max_members
        if len(checked) > limit:
            raise UsageError(f"room {name!r} would have {len(checked)} members; rooms.max_members is {limit}")
        return checked

    async def create(self, name: str, members: list[str]) -> Room:
        if not ROOM_NAME_RE.match(name):
            raise UsageError(f"invalid room name {name!r}: a-z, 0-9, '-', '_' (1-64, starting with a letter or digit)")
        return await roomstore.create(self.db, name, self.check_members(name, members))

    async def add(self, name: str, members: list[str]) -> Room:
        room = await roomstore.get(self.db, name)
        return await roomstore.set_members(self.db, name, self.check_members(name, [*room.members, *members]))

    async def remove(self, name: str, members: list[str]) -> Room:
        room = await roomstore.get(self.db, name)
        for member in members:
            if member not in room.members:
                raise UsageError(f"room {name!r} has no member {member!r} (it has: {', '.join(room.members)})")
        return await roomstore.set_members(self.db, name, [m for m in room.members if m not in members])

    async def get(self, name: str) -> Room:
        return await roomstore.get(self.db, name)

    async def every(self) -> list[Room]:
        return await roomstore.every(self.db)

    async def transcript(self, name: str, *, after: int = 0) -> list[Line]:
        await roomstore.get(self.db, name)
        return await roomstore.lines(self.db, name, after=after)

    @commits
    async def say(self, name: str, text: str, *, sender: str) -> tuple[Line, Round]:
        """The person's words into the room: its line, and the round that asks every member in turn, those the
        words hand the floor to (`@research`) first."""
        check_message(text)
        room = await roomstore.get(self.db, name)
        if not room.members:
            raise UsageError(f"room {name!r} has no members: `backchannel room add {name} MEMBER`")
        first = named(text, room.members)
        order = (*first, *(m for m in room.members if m not in first))
        return await roomstore.say(self.db, name, sender, text, order)

    async def round(self, round_id: str) -> Round:
        return await roomstore.round_of(self.db, round_id)

    # --- driving the rounds --------------------------------------------------------------------------

    async def run(self) -> None:
        """Background job: drive every room that has a round open and no live gateway driving it."""
        while True:
            try:
                for name in await roomstore.with_open_rounds(self.db):
                    if name not in self._driving:
                        self.start(name)
            except StoreError as exc:
                log.warning("rooms not looked at this round: %s", exc.message)
            await asyncio.sleep(LOOK_SECONDS)

    def start(self, name: str) -> asyncio.Task[None]:
        """Drive room `name` in a task of its own (until it has no round open), unless one does already."""
        task = self._driving.get(name)
        if task is None or task.done():
            task = asyncio.create_task(self.drive(name))
            self._driving[name] = task
            task.add_done_callback(lambda _: self._driving.pop(name, None))
        return task

    async def stop(self) -> None:
        tasks = list(self._driving.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def drive(self, name: str) -> None:
        """Its open rounds one after another, while this gateway holds the room's lease."""
        renewing: asyncio.Task[None] | None = None
        try:
            if not await self._claim(name):
                return
            renewing = asyncio.create_task(self._renew(name))
            while (open_round := await roomstore.oldest_open(self.db, name)) is not None:
                await self._drive(open_round)
        except StoreError as exc:
            log.warning("room %s: stopped driving (another gateway or the next look goes on): %s", name, exc.message)
        except Exception:
            log.exception("room %s: driving it failed", name)
        finally:
            if renewing is not None:
                renewing.cancel()
                with contextlib.suppress(asyncio.CancelledError, StoreError):
                    await renewing
                with contextlib.suppress(StoreError):
                    await roomstore.release(self.db, name, owner=self.owner)

    async def _claim(self, name: str) -> bool:
        """The room's lease; taken at once from a gateway known to have ended (its process gone from this machine,
        or its liveness lock free on a shared store), not when its lease runs out."""
        if await roomstore.claim(self.db, name, owner=self.owner, lease_seconds=LEASE_SECONDS):
            return True
        held = await roomstore.driver(self.db, name)
        if held is None or not (owner_is_dead(held) or held in await self.db.gone({held})):
            return False
        log.warning("room %s taken over at once: the gateway that drove it has ended", name)
        return await roomstore.claim(self.db, name, owner=self.owner, lease_seconds=LEASE_SECONDS, ended=held)

    async def _renew(self, name: str) -> None:
        while True:
            await asyncio.sleep(LEASE_SECONDS / 3)
            with contextlib.suppress(StoreError):
                await roomstore.claim(self.db, name, owner=self.owner, lease_seconds=LEASE_SECONDS)

    async def _drive(self, round_: Round) -> None:
        cap = self.settings.agent_messages_per_message
        while True:
            room = await roomstore.get(self.db, round_.room)
            if round_.pending is not None:  # asked before a stop or a crash: asked again (the same run)
                line = await roomstore.line(self.db, round_.pending)
                member = Waiting(line.speaker, round_.depth)
            else:
                waiting = tuple(w for w in round_.waiting if w.member in room.members)  # a member removed since
                if not waiting:
                    await roomstore.close(self.db, round_)
                    return
                if round_.answers >= cap:
                    names = ", ".join(w.member for w in waiting)
                    await roomstore.note(
                        self.db,
                        round_,
                        f"{cap} answers to one message (rooms.agent_messages_per_message): {names} not asked; "
                        "say something to go on",
                    )
                    await roomstore.close(self.db, round_)
                    return
                member = waiting[0]
                round_, line = await roomstore.ask(self.db, round_, member)
            given = await self._given(room, line)
            answer = await self._answer(room, round_, line, given)
            then = list(round_.waiting)
            if answer.state == "completed":
                then = await self._hand_offs(room, round_, member, answer.text, given, then)
            round_ = await roomstore.answered(
                self.db,
                round_,
                line,
                text=answer.text,
                state=answer.state,
                run_id=answer.run_id,
                error=answer.error,
                then=tuple(then),
            )

    async def _given(self, room: Room, line: Line) -> str:
        _, seen = await roomstore.member_state(self.db, room.name, line.speaker)
        return briefing(room, await roomstore.lines(self.db, room.name, after=seen, before=line.seq), line.speaker)

    async def _hand_offs(
        self, room: Room, round_: Round, member: Waiting, text: str, given: str, then: list[Waiting]
    ) -> list[Waiting]:
        """The members `text` hands the floor to (named by it, not just repeated from what it was given), first."""
        already = set(named(given, room.members))
        chosen = [m for m in named(text, room.members) if m != member.member and m not in already]
        if not chosen:
            return then
        depth = member.depth + 1
        limit = self._max_hops(member.member)
        if depth > limit:
            said = f"{member.member} handed the floor on past the hop limit ({limit}, max_hops): not asked"
            await roomstore.note(self.db, round_, said)
            return then
        rest = [w for w in then if w.member not in chosen]
        return [*(Waiting(m, depth) for m in chosen), *rest]

    def _max_hops(self, member: str) -> int:
        local = addresses.as_local(addresses.parse_target(member))
        if local is not None and local.profile is not None:
            with contextlib.suppress(BackchannelError):
                return self.directory.profile(local.profile).config.messaging.max_hops
        return 6

    async def _answer(self, room: Room, round_: Round, line: Line, given: str) -> Answer:
        """One member's turn: its briefing delivered (keyed on the round and the line: asked again, the same run)
        and its answer waited for."""
        key = f"room-{round_.id}-{line.seq}"

        async def here(_: Target) -> Answer:  # a session of this home (a group: refused as none, by `_session`)
            return await self._own_answer(room, line, given, key)

        async def peer(target: RemoteAddress) -> Answer:
            return await self._peer_answer(line, target, given, key)

        try:
            return await by_kind(addresses.parse_target(line.speaker), local=here, remote=peer, group=here)
        except StoreError:
            raise  # the round goes on once the store answers (this gateway's next look, or another's)
        except BackchannelError as exc:
            return Answer("", "failed", error=f"{exc.code}: {exc.message}")

    async def _own_answer(self, room: Room, line: Line, given: str, key: str) -> Answer:
        session = await self._session(room, line.speaker)
        sent = await self.delivery.submit(Attempt.handed_in(session, given, ROOM_SENDER, key=key))
        await roomstore.started(self.db, line, sent.run.id)
        done = await self.delivery.wait(sent.run.id, None)
        result = done.result
        if result.outcome is Outcome.DELIVERED:
            return Answer(result.reply or "", "completed", run_id=result.run_id)
        return Answer(result.reply or "", result.state or "failed", run_id=result.run_id, error=result.error)

    async def _peer_answer(self, line: Line, target: RemoteAddress, given: str, key: str) -> Answer:
        peer = self.outbound.peer(target.peer)
        result = await self.outbound.dm(peer, target.profile, given, wait=PEER_WAIT_SECONDS, key=key, sender=FROM_ROOM)
        if result.run_id:
            await roomstore.started(self.db, line, result.run_id)
        while result.outcome in (Outcome.RECEIPT, Outcome.HELD) and result.run_id:
            await asyncio.sleep(PEER_POLL_SECONDS)
            result, _ = await self.outbound.status(peer, result.run_id, agent=target.profile)
        if result.outcome is Outcome.DELIVERED:
            return Answer(result.reply or "", "completed", run_id=result.run_id)
        return Answer("", result.state or result.outcome.value, run_id=result.run_id, error=result.error)

    async def _session(self, room: Room, member: str) -> Session:
        """The member's room session: for a profile, a session of its own titled `Room NAME` (made at its first
        turn); for a session's address, that session."""
        session_id, _ = await roomstore.member_state(self.db, room.name, member)
        if session_id is not None:
            with contextlib.suppress(NotFound):
                return await self.directory.session(session_id)
        target = addresses.as_local(addresses.parse_target(member))
        if target is None:
            raise UsageError(f"{member!r} is not an agent of this gateway")
        if target.session_id is not None:
            view = await self.directory.existing(target)
        else:
            assert target.profile is not None
            title = f"Room {room.name}"
            found = await sessionstore.find_by_title(self.db, target.profile, title)
            if found is not None:
                view = found
            else:
                view, _ = await self.directory.create_session(target.profile, title=title, source="room")
        await roomstore.set_member_session(self.db, room.name, member, view.id)
        return view
