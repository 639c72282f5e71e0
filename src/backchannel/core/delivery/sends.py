"""The agents' sends: the delivery service as a turn's agent sees it (the `Sender` the tools are given).

A send from inside a turn goes through the one admit path (`Delivery.admit`), which checks it with the
facts of that turn (its hop, the chain of sessions waiting on it, the pair's count in this exchange) and
keys it on the turn's run, target, text and ordinal; then through the same queue (local) or `Outbound`
(peers) as every other message.
"""

from __future__ import annotations

import time
from typing import Any

from ... import addresses, deadlines, keys, policy
from ...addresses import BOT_CHAT_TITLE, Address, GroupAddress, LocalAddress, RemoteAddress, Target
from ...agent.tools.base import ToolContext
from ...errors import NotFound, PeerError, PeerOutcomeUnknown, UsageError
from ...outcome import WATCHING, GroupResult, Outcome, Result, failed, unknown
from ...records import Run
from ...states import RunState
from ...store import idle as idlestore
from ...store.driver import Db
from ..questions import Questions
from ..queue.commits import commits
from ..queue.queue import RunQueue
from . import peer_questions
from .admission import Admitted, Attempt
from .delivery import MAX_WAIT_SECONDS, Delivery, check_message
from .directory import Directory
from .door import by_kind
from .groups import Groups
from .imports import Imports
from .outbound import Outbound, SentFrom


class AgentSends:
    """send_to_session, send_to_peer, check, cancel and the list of allowed targets, for one home's agents."""

    def __init__(
        self,
        *,
        db: Db,
        queue: RunQueue,
        directory: Directory,
        outbound: Outbound,
        delivery: Delivery,
        imports: Imports,
        groups: Groups,
        questions: Questions,
    ) -> None:
        self.db = db
        self.questions = questions
        self.groups = groups
        self.imports = imports
        self.queue = queue
        self.directory = directory
        self.outbound = outbound
        self.delivery = delivery
        self.gateway_id = delivery.gateway_id

    async def send(
        self,
        ctx: ToolContext,
        address: str,
        message: str,
        *,
        wait: float,
        steer: bool = False,
        deadline: float | None = None,
    ) -> Result:
        """send_to_session: from the turn of `ctx` to a local address; the reply, a receipt, or a refusal. With
        `steer`, into the target's running turn at its next model step (when it runs one that can take it). Its
        deadline: `deadline`, never later than what the turn passes on of its own (`deadlines.inherited`)."""
        local = addresses.as_local(addresses.parse(address))
        if local is None:
            raise UsageError(f"{address!r} is a peer address: use send_to_peer", code="invalid_address")
        return await self._local(ctx, local, message, wait=wait, steer=steer, deadline=deadline)

    async def send_peer(
        self, ctx: ToolContext, target: str, message: str, *, wait: float, deadline: float | None = None
    ) -> Result:
        """send_to_peer: from the turn of `ctx` to an agent on another gateway (`peer[/profile]`)."""
        remote = addresses.parse_peer(target)
        if remote.session_id is not None:
            raise UsageError(
                f"{target!r}: send_to_peer takes peer or peer/profile (its Bot Chat)", code="invalid_address"
            )
        return await self._peer(ctx, remote, message, wait=wait, deadline=deadline)

    async def answer_peer(self, ctx: ToolContext, target: str, run_id: str, answer: str) -> Result:
        """send_to_peer with a run's id: the answer to the question that run (one this profile sent to `target`)
        asks, relayed to the peer as our person's answer is; a receipt (the reply comes into the sending session),
        or a refusal (`question_closed`, `question_not_asked`, `not_found`)."""
        remote = addresses.parse_peer(target)
        peer = self.outbound.peer(remote.peer)
        row = await self.outbound.sent(peer.name, run_id)
        if row is None or row.sender_profile != ctx.profile.name:
            raise NotFound(f"no message to {target} started run {run_id!r} for profile {ctx.profile.name!r}")
        try:
            asked = await peer_questions.answer(self.db, self.questions, row, answer, by=ctx.address)
        except PeerError as exc:  # the peer did not take it: the question is open again, to be answered again
            return failed(row.target, exc.code, exc.message)
        queued = RunState.QUEUED.value  # the peer's run, given the answer, goes on to its reply
        return Result(Outcome.RECEIPT, row.target, run_id=run_id, session_id=asked.session_id or None, state=queued)

    async def send_group(self, ctx: ToolContext, group: str, message: str, *, wait: float) -> GroupResult:
        """send_to_group: from the turn of `ctx` to every member of a group."""
        target = addresses.as_group(addresses.parse_target(group))
        if target is None:
            raise UsageError(f"{group!r} is not a group (group:NAME)", code="invalid_address")
        return await self._group(ctx, target, message, wait=wait)

    async def send_to(self, ctx: ToolContext, to: Target, message: str, *, wait: float) -> Result | GroupResult:
        """From the turn of `ctx` to any address (a mention's): the one place an agent's send picks its way by
        the address's kind, each under the same rules."""

        async def local(address: LocalAddress) -> Result | GroupResult:
            return await self._local(ctx, address, message, wait=wait)

        async def peer(address: RemoteAddress) -> Result | GroupResult:
            return await self._peer(ctx, address, message, wait=wait)

        async def group(address: GroupAddress) -> Result | GroupResult:
            return await self._group(ctx, address, message, wait=wait)

        return await by_kind(to, local=local, remote=peer, group=group)

    @commits
    async def _local(
        self,
        ctx: ToolContext,
        to: LocalAddress,
        message: str,
        *,
        wait: float,
        steer: bool = False,
        deadline: float | None = None,
    ) -> Result:
        check_message(message)
        now = time.time()
        deadline = deadlines.inherited(ctx.deadline, deadline, now=now)
        wait = deadlines.bounded(min(max(wait, 0.0), MAX_WAIT_SECONDS), deadline, now=now)
        # A Bot Chat is made only once the send is allowed; a Hermes session id is imported on demand.
        profile_name, target = await self.imports.find(to)
        admitted = await self.delivery.admit(
            Attempt(
                kind="send",
                sender=ctx.address,
                text=message,
                session=target,
                profile=profile_name,
                wait=wait,
                turn=ctx,
                steer=steer,
                deadline=deadline,
            )
        )
        if admitted.refusal is not None:
            return admitted.refused
        run, created = admitted.run, admitted.created
        assert run is not None
        if wait > 0 and not run.state.terminal:
            async with self.queue.waiting(ctx.profile.name):
                run = await self.queue.wait(run.id, wait, known=run)
            if not run.state.terminal and not await self.queue.ask_wake(run.id):
                run = await self.queue.get(run.id)  # it ended just now
        return await self.delivery.result_of(run, replayed=not created)

    async def _group(self, ctx: ToolContext, group: GroupAddress, message: str, *, wait: float) -> GroupResult:
        """To every member of a group, each as if sent alone (its own rules, run and outcome); a member that is
        this agent itself is skipped."""
        check_message(message)

        def skip(address: Address) -> str | None:
            local = addresses.as_local(address)
            if local is not None and (
                (local.profile == ctx.profile.name and local.session_id in (None, ctx.session_id))
                or (local.profile is None and local.session_id == ctx.session_id)
            ):
                return "the sender itself"
            return None

        async def local(address: LocalAddress) -> Result:
            return await self._local(ctx, address, message, wait=wait)

        async def peer(address: RemoteAddress) -> Result:
            if address.session_id is not None:
                raise UsageError(f"{address}: a group reaches a peer's agent (its Bot Chat), not its sessions")
            return await self._peer(ctx, address, message, wait=wait)

        async def one(address: Address) -> Result:
            return await by_kind(address, local=local, remote=peer)

        return await self.groups.send(group, one, skip=skip)

    @commits
    async def notify_when_idle(self, ctx: ToolContext, address: str) -> Result:
        """One notice into the session of `ctx` when the local session `address` next has nothing queued or running;
        refused as a send to it would be. Idle already: said at once (`delivered`, state `idle`), no notice."""
        parsed = addresses.as_local(addresses.parse(address))
        if parsed is None:
            raise UsageError(f"{address!r} is on another gateway: notify_when_idle watches this gateway's sessions")
        profile_name, target = await self.imports.find(parsed)
        shown = f"{profile_name}/{target.id}" if target is not None else profile_name
        asked = await self.delivery.admit(
            Attempt(
                kind="send",
                sender=ctx.address,
                text="(notify when idle)",
                session=target,
                profile=profile_name,
                wait=0.0,
                turn=ctx,
            ),
            submit=False,
        )
        if asked.refusal is not None:
            return asked.refused
        if target is None or not await idlestore.busy(self.db, target.id):
            return Result(
                Outcome.DELIVERED, shown, session_id=target.id if target else None, state="idle", reply="idle"
            )
        await idlestore.watch(
            self.db,
            session_id=target.id,
            target=shown,
            sender=ctx.address,
            sender_session=ctx.session_id,
            hops=ctx.hops + 1,
            origin=ctx.exchange,
        )
        return Result(Outcome.RECEIPT, shown, session_id=target.id, state=WATCHING)

    async def _peer(
        self, ctx: ToolContext, remote: RemoteAddress, message: str, *, wait: float, deadline: float | None = None
    ) -> Result:
        """To an agent on another gateway, under the same rules as a local send."""
        check_message(message)
        wait = min(max(wait, 0.0), MAX_WAIT_SECONDS)
        deadline = deadlines.inherited(ctx.deadline, deadline, now=time.time())
        peer = self.outbound.peer(remote.peer)
        admitted = await self._admitted(
            Attempt(
                kind="send",
                sender=ctx.address,
                text=message,
                peer=RemoteAddress(peer.name, remote.profile),
                wait=wait,
                turn=ctx,
            )
        )
        if admitted.refusal is not None:
            return admitted.refused
        to, facts = admitted.target, admitted.facts
        key = keys.for_peer(self.gateway_id, keys.agent_send(ctx.run_id, to, message, ctx.ordinal(to, message)))
        try:
            async with self.queue.waiting(ctx.profile.name):
                return await self.outbound.dm(
                    peer,
                    remote.profile,
                    message,
                    wait=wait,
                    key=key,
                    sender=SentFrom(
                        address=ctx.address,
                        profile=ctx.profile.name,
                        session_id=ctx.session_id,
                        exchange=ctx.exchange,
                        hops=facts.hops,
                        chain=tuple(facts.chain),
                        deadline=deadline,
                    ),
                )
        except PeerError as exc:  # unreachable, or our key refused: the model learns it; nothing was lost
            if isinstance(exc, PeerOutcomeUnknown):
                return unknown(to, exc.message)
            return failed(to, exc.code, exc.message)

    async def check(self, ctx: ToolContext, run_id: str) -> Result:
        """A message this profile sent: a local run, or one that went to a peer (as last known here)."""
        try:
            return await self.delivery.result_of(await self._own(ctx, run_id))
        except NotFound:
            sent = await self.outbound.sent_by(ctx.profile.name, run_id)
            if sent is None:
                raise
            return sent

    @commits
    async def cancel(self, ctx: ToolContext, run_id: str) -> Result:
        await self._own(ctx, run_id)
        return await self.delivery.result_of(await self.queue.stop(run_id))

    async def targets(self, ctx: ToolContext, profile: str | None = None) -> list[dict[str, Any]]:
        """The local sessions this profile may message (`policy.targets`), with titles and last activity."""
        names = [profile] if profile else self.directory.profiles()
        found: list[dict[str, Any]] = []
        sender = await self.delivery.admission.turn_party(ctx)
        for name in names:
            self.directory.check_profile(name)
            rules = self.directory.profile(name).config.messaging
            sessions = {s.id: s for s in await self.directory.sessions(name, limit=50)}
            listed = [(s.id, s.title == BOT_CHAT_TITLE) for s in sessions.values()]
            for t in policy.targets(sender, name, rules, listed):
                s = sessions.get(t.session_id or "")
                found.append(
                    {
                        "address": t.address,
                        "title": s.title if s is not None else BOT_CHAT_TITLE,
                        "last_active": s.updated_at if s is not None else None,
                        "bot_chat": t.bot_chat,
                    }
                )
        return found

    async def _own(self, ctx: ToolContext, run_id: str) -> Run:
        try:
            run = await self.queue.get(run_id)
        except NotFound:
            run = None
        if run is None or run.sender_profile != ctx.profile.name:
            raise NotFound(f"no message {run_id!r} sent by profile {ctx.profile.name!r}", code="not_found")
        return run

    @commits
    async def _admitted(self, attempt: Attempt) -> Admitted:
        """A send to a peer admitted, its refusal (if any) committed before the dm, which is no part of it."""
        return await self.delivery.admit(attempt)
