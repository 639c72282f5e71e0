"""The agents' sends: the delivery service as a turn's agent sees it (the `Sender` the tools are given).

A send from inside a turn is checked by the one policy with the facts of that turn (its hop, the chain
of sessions waiting on it, the pair's count in this exchange), keyed on the turn's run, target, text and
ordinal, and goes through the same queue (local) or `Outbound` (peers) as every other message.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from ... import addresses, keys, policy
from ...addresses import RemoteAddress
from ...agent.tools.base import ToolContext
from ...errors import NotFound, PeerError, PeerOutcomeUnknown, UsageError
from ...outcome import Result, failed, unknown
from ...store import exchanges
from ...store import runs as runstore
from ...store.db import Database
from ...store.runs import NewRun, RunRow
from ...store.sessions import BOT_CHAT_TITLE
from ..queue.commits import commits
from ..queue.queue import RunQueue
from .delivery import MAX_WAIT_SECONDS, PAIR_WINDOW_SECONDS, Delivery, check_message
from .directory import Directory
from .imports import Imports
from .outbound import Outbound, SentFrom


class AgentSends:
    """send_to_session, send_to_peer, check, cancel and the list of allowed targets, for one home's agents."""

    def __init__(
        self,
        *,
        db: Database,
        queue: RunQueue,
        directory: Directory,
        outbound: Outbound,
        delivery: Delivery,
        imports: Imports,
    ) -> None:
        self.db = db
        self.imports = imports
        self.queue = queue
        self.directory = directory
        self.outbound = outbound
        self.delivery = delivery
        self.gateway_id = delivery.gateway_id

    @commits
    async def send(self, ctx: ToolContext, address: str, message: str, *, wait: float) -> Result:
        """From the turn of `ctx` to a local address; the reply, a receipt, or a refusal."""
        check_message(message)
        wait = min(max(wait, 0.0), MAX_WAIT_SECONDS)
        parsed = addresses.parse(address)
        if isinstance(parsed, RemoteAddress):
            raise UsageError(f"{address!r} is a peer address: use send_to_peer", code="invalid_address")
        # A Bot Chat is made only once the send is allowed; a Hermes session id is imported on demand.
        profile_name, target = await self.imports.find(parsed)
        target_profile = self.directory.profile(profile_name)
        is_bot = target is None or target.title == BOT_CHAT_TITLE
        target_id = target.id if target is not None else ""
        waits = wait > 0
        attempt = policy.Attempt(
            kind="send",
            sender=self._sender_party(ctx),
            target=policy.Party(
                policy.local_names(profile_name, target_id, bot_chat=is_bot),
                key=self.delivery.key(target_id) if target is not None else "",
                policy=target_profile.config.messaging,
            ),
            hops=ctx.hops + 1,
            chain=(*ctx.chain, self.delivery.key(ctx.session_id)) if waits else (),
            waits=waits,
            pair_sent=runstore.pair_count(
                self.db,
                sender_profile=ctx.profile.name,
                profile=profile_name,
                origin=ctx.exchange,
                since=time.time() - PAIR_WINDOW_SECONDS,
            ),
        )
        refusal = policy.check(attempt)
        if refusal is not None:
            return self.delivery.record_refusal(refusal, attempt, message=message, wait=wait)
        session = target if target is not None else self.directory.bot_chat(profile_name)
        shown = attempt.target.shown
        held = policy.held(attempt)
        run, created = self.queue.submit(
            NewRun(
                sender=ctx.address,
                profile=session.profile,
                session_id=session.id,
                message=message,
                idempotency_key=keys.agent_send(ctx.run_id, shown, message, ctx.ordinal(shown, message)),
                hops=attempt.hops,
                chain=tuple(attempt.chain),
                origin=ctx.exchange,
                sender_profile=ctx.profile.name,
                sender_session=ctx.session_id,
                wait_seconds=wait,
                wake=not waits,
                held=held,
                ttl_seconds=self.delivery.hold_expiry(session.profile) if held else None,
            ),
            admit=functools.partial(self.delivery.rates.admit, ctx.address),
        )
        if waits and not run.state.terminal:
            async with self.queue.waiting(ctx.profile.name):
                run = await self.queue.wait(run.id, wait, known=run)
            if not run.state.terminal and not self.queue.ask_wake(run.id):
                run = self.queue.get(run.id)  # it ended just now
        return self.delivery.result_of(run, replayed=not created)

    async def send_peer(self, ctx: ToolContext, target: str, message: str, *, wait: float) -> Result:
        """From the turn of `ctx` to an agent on another gateway (`peer[/profile]`), under the same rules."""
        check_message(message)
        wait = min(max(wait, 0.0), MAX_WAIT_SECONDS)
        remote = addresses.parse_remote(target.removeprefix("peer:"))
        if remote.session_id is not None:
            raise UsageError(
                f"{target!r}: send_to_peer takes peer or peer/profile (its Bot Chat)", code="invalid_address"
            )
        peer = self.outbound.peer(remote.peer)
        to = f"peer:{peer.name}/{remote.profile}" if remote.profile else f"peer:{peer.name}"
        names = [to] if remote.profile else [to, f"{to}/default"]
        waits = wait > 0
        attempt = policy.Attempt(
            kind="send",
            sender=self._sender_party(ctx),
            target=policy.Party(names),
            hops=ctx.hops + 1,
            chain=(*ctx.chain, self.delivery.key(ctx.session_id)) if waits else (),
            waits=waits,
            pair_sent=self.outbound.sent_count(
                ctx.profile.name, to, ctx.exchange, since=time.time() - PAIR_WINDOW_SECONDS
            ),
        )
        refusal = policy.check(attempt) or self._peer_waits_on_us(ctx, peer.name, attempt)
        if refusal is not None:
            return await self._committed_refusal(refusal, attempt, message=message, wait=wait)
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
                        hops=attempt.hops,
                        chain=tuple(attempt.chain),
                    ),
                )
        except PeerError as exc:  # unreachable, or our key refused: the model learns it; nothing was lost
            if isinstance(exc, PeerOutcomeUnknown):
                return unknown(to, exc.message)
            return failed(to, exc.code, exc.message)

    async def check(self, ctx: ToolContext, run_id: str) -> Result:
        """A message this profile sent: a local run, or one that went to a peer (as last known here)."""
        try:
            return self.delivery.result_of(self._own(ctx, run_id))
        except NotFound:
            sent = self.outbound.sent_by(ctx.profile.name, run_id)
            if sent is None:
                raise
            return sent

    @commits
    async def cancel(self, ctx: ToolContext, run_id: str) -> Result:
        self._own(ctx, run_id)
        return self.delivery.result_of(await self.queue.stop(run_id))

    def targets(self, ctx: ToolContext, profile: str | None = None) -> list[dict[str, Any]]:
        """The local sessions this profile may message (its allowlist), with titles and last activity."""
        allow = ctx.profile.config.messaging.allow
        names = [profile] if profile else self.directory.profiles()
        found: list[dict[str, Any]] = []
        sender = self._sender_party(ctx).names
        for name in names:
            self.directory.check_profile(name)
            accept = self.directory.profile(name).config.messaging.accept
            if accept is not None and not policy.matches(accept, sender):
                continue  # its accept list would refuse this sender: not a target
            sessions = self.directory.sessions(name, limit=50)
            if policy.matches(allow, [name]) and not any(s.title == BOT_CHAT_TITLE for s in sessions):
                found.append({"address": name, "title": BOT_CHAT_TITLE, "last_active": None, "bot_chat": True})
            for s in sessions:
                bot = s.title == BOT_CHAT_TITLE
                if s.id != ctx.session_id and policy.matches(allow, policy.local_names(name, s.id, bot_chat=bot)):
                    found.append(
                        {
                            "address": name if bot else f"{name}/{s.id}",
                            "title": s.title,
                            "last_active": s.updated_at,
                            "bot_chat": bot,
                        }
                    )
        return found

    def _own(self, ctx: ToolContext, run_id: str) -> RunRow:
        try:
            run = self.queue.get(run_id)
        except NotFound:
            run = None
        if run is None or run.sender_profile != ctx.profile.name:
            raise NotFound(f"no message {run_id!r} sent by profile {ctx.profile.name!r}", code="not_found")
        return run

    def _peer_waits_on_us(self, ctx: ToolContext, peer: str, attempt: policy.Attempt) -> policy.Refusal | None:
        """A wait on `peer` while it waits on this turn (or on a turn waiting for this one) never ends: refused
        from our own records (the runs it sent us synchronously), whatever chain it sent."""
        if not attempt.waits:
            return None
        local = f"{self.gateway_id}:"
        sessions = [ctx.session_id, *(e.removeprefix(local) for e in ctx.chain if e.startswith(local))]
        if exchanges.waited_on_by(self.db, peer, sessions, now=time.time()) is None:
            return None
        return policy.Refusal("would_deadlock", f"peer:{peer} {policy.DEADLOCK_ADVICE}")

    def _sender_party(self, ctx: ToolContext) -> policy.Party:
        bot = self.directory.is_bot_chat(ctx.session_id)
        return policy.Party(
            policy.local_names(ctx.profile.name, ctx.session_id, bot_chat=bot),
            key=self.delivery.key(ctx.session_id),
            policy=ctx.profile.config.messaging,
        )

    @commits
    async def _committed_refusal(
        self, refusal: policy.Refusal, attempt: policy.Attempt, *, message: str, wait: float | None
    ) -> Result:
        return self.delivery.record_refusal(refusal, attempt, message=message, wait=wait)
