"""Groups: a message to `group:NAME` goes to every member of the group, in parallel, each as if sent alone.

A group is a list of addresses in the home's config.yaml (`groups: {team: [research, builds, "peer:spark/ops"]}`);
a member may be a group itself, expanded once (a member reached through two groups gets one message), and a group
that contains itself is refused. Each member's send goes under the sender's own rules (the person's, or the
sending agent's: allow, accept, hold, hops, deadlock, pair budget) and is its own run; the group send's answer is
every member's outcome (`outcome.GroupResult`). A member that names nothing is that member's failure
(`not_found`), never the others'; a member that is the sender itself is skipped, and said so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from ... import addresses
from ...addresses import Address, GroupAddress
from ...errors import BackchannelError, NotFound, UsageError
from ...home import config
from ...outcome import GroupResult, MemberResult, Result, failed, of_error, refused, unknown
from ...outcome import Outcome as Outcome

Send = Callable[[Address], Awaitable[Result]]  # one member's send: its outcome
Skip = Callable[[Address], str | None]  # why a member is not sent to (the sender itself), or None


@dataclass(frozen=True)
class Member:
    """A member as the group lists it, and the address it is (or why it is none)."""

    text: str
    address: Address | None
    problem: str | None = None


class Groups:
    """The groups of one home, and the fan-out of a message to a group's members."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def names(self) -> list[str]:
        return sorted(config.load_gateway_config(self.root).groups)

    def members(self, name: str) -> list[Member]:
        """The group's members in order, groups in it expanded once; NotFound for a group that does not exist,
        UsageError for one that contains itself."""
        groups = config.load_gateway_config(self.root).groups
        found: list[Member] = []
        seen: set[str] = set()

        def expand(group: str, path: tuple[str, ...]) -> None:
            if group not in groups:
                known = ", ".join(sorted(groups)) or "none"
                raise NotFound(f"no group {group!r} (groups: {known})", code="group_not_found")
            for text in groups[group]:
                try:
                    target = addresses.parse_target(text)
                except UsageError as exc:
                    found.append(Member(text, None, exc.message))
                    continue
                inner = addresses.as_group(target)
                if inner is not None:
                    if inner.name in (*path, group):
                        cycle = " → ".join((*path, group, inner.name))
                        raise UsageError(f"group {name!r} contains itself ({cycle}): remove one of them")
                    expand(inner.name, (*path, group))
                    continue
                key = str(target)
                if key not in seen:
                    seen.add(key)
                    found.append(Member(text, addresses.as_local(target) or addresses.as_remote(target)))

        expand(name, ())
        return found

    async def send(self, group: GroupAddress, send: Send, *, skip: Skip) -> GroupResult:
        """`send` to each member of `group` at once; every member's outcome, whatever the others'."""
        members = self.members(group.name)
        skipped = {m.text: why for m in members if m.address is not None and (why := skip(m.address)) is not None}
        if len(skipped) == len(members):
            raise UsageError(f"{group} has no member to send to but the sender itself", code="empty_group")

        async def one(member: Member) -> MemberResult:
            if member.text in skipped:
                return MemberResult(member.text, skipped=skipped[member.text])
            if member.address is None:
                return MemberResult(member.text, failed(member.text, "not_found", member.problem or "not an address"))
            try:
                return MemberResult(member.text, await send(member.address))
            except BackchannelError as exc:
                return MemberResult(member.text, _of_error(member.text, exc))

        return GroupResult(str(group), tuple(await asyncio.gather(*(one(m) for m in members))))


def _of_error(target: str, exc: BackchannelError) -> Result:
    """A member's send that raised, as its outcome (the other members' go on): a member that names nothing
    failed (`not_found`), a refusal is refused, a peer's silence unknown."""
    if isinstance(exc, NotFound):
        return failed(target, exc.code, exc.message)
    outcome = of_error(exc)
    if outcome is Outcome.REFUSED:
        return refused(target, exc.code, exc.message)
    if outcome is Outcome.UNKNOWN:
        return unknown(target, exc.message)
    return failed(target, exc.code, exc.message)
