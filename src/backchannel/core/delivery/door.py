"""The person's one door: a message to any address, resolved and dispatched in this one place.

    a session of this home   resolved (a profile is its Bot Chat, made on first use; a Hermes session id not
                             seen yet is imported), then admitted and queued as every message is
    a peer's agent           sent to that peer (`Outbound`), kept in this home's ledger
    a group                  a send to each member, each as if sent alone, keyed on the group send's key and the
                             member (the same send again answers for the same runs)

The CLI's `send`, `POST /v1/messages` and the group and peer routes all come in here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ... import keys
from ...addresses import Address, GroupAddress, LocalAddress, RemoteAddress, Target
from ...errors import UsageError
from ...outcome import GroupResult, Result
from ...records import Session
from .admission import Attempt
from .delivery import MAX_WAIT_SECONDS, Delivery, check_message
from .groups import Groups
from .imports import Imports
from .outbound import Outbound, SentFrom

T = TypeVar("T")


def by_kind(
    to: Target,
    *,
    local: Callable[[LocalAddress], T],
    remote: Callable[[RemoteAddress], T],
    group: Callable[[GroupAddress], T] | None = None,
) -> T:
    """The one place a message's way is picked by its address's kind: the person's sends here, an agent's
    (`sends.AgentSends`) and a room's members' (`core.rooms`) each give what they do for each kind (`group` None:
    `to` is a group's member, never a group itself)."""
    if isinstance(to, GroupAddress):
        if group is None:
            raise UsageError(f"{to}: a group's members are agents, not groups", code="invalid_address")
        return group(to)
    if isinstance(to, RemoteAddress):
        return remote(to)
    return local(to)


class Door:
    """Sends as the person (`sender`: `human:<surface>`) to a session, a peer's agent or a group."""

    def __init__(self, groups: Groups, delivery: Delivery, imports: Imports, outbound: Outbound) -> None:
        self.groups = groups
        self.delivery = delivery
        self.imports = imports
        self.outbound = outbound

    async def send(
        self,
        to: Target,
        text: str,
        *,
        sender: str,
        key: str,
        wait: float | None,
        steer: bool = False,
        deadline: float | None = None,
    ) -> Result | GroupResult:
        """`text` to `to`, waited for up to `wait` seconds (a group's members each; None: a session's run until it
        ends, a peer's reply as long as a wait may be); with `steer`, into the target session's running turn at its
        next model step; with `deadline`, not started after it (a turn still running then is stopped)."""
        check_message(text)
        if steer and not isinstance(to, LocalAddress):
            raise UsageError(f"steer gives a message to a running turn of this home's sessions; {to} is none")
        if isinstance(to, GroupAddress):

            async def member(address: Address) -> Result:
                sent = await self.send(
                    address, text, sender=sender, key=keys.group_member(key, str(address)), wait=wait, deadline=deadline
                )
                assert isinstance(sent, Result)  # a group's members are expanded: none is a group
                return sent

            return await self.groups.send(to, member, skip=lambda address: None)
        if isinstance(to, RemoteAddress):
            if to.session_id is not None:
                raise UsageError(
                    f"{to}: address a peer as peer:NAME or peer:NAME/AGENT (its Bot Chat), not one of its sessions",
                    code="invalid_address",
                )
            bounded = MAX_WAIT_SECONDS if wait is None else wait
            peer = self.outbound.peer(to.peer)
            return await self.outbound.dm(
                peer, to.profile, text, wait=bounded, key=key, sender=SentFrom(deadline=deadline)
            )
        incoming = Attempt.handed_in(await self.session(to), text, sender, key=key, steer=steer, deadline=deadline)
        return (await self.delivery.deliver(incoming, wait=wait)).result

    async def session(self, to: LocalAddress) -> Session:
        """The session a local address names (a profile: its Bot Chat, made now if it has none); a stream of a
        message follows its run from there."""
        return await self.imports.resolve(to)
