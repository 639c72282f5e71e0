"""Agents messaging sessions: send (with policy, guards, ledger), check, cancel, list targets, and mentions."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any, NoReturn

from .. import addresses, keys, policy
from ..addresses import LocalAddress, RemoteAddress
from ..errors import BackchannelError, NotFound, PeerError, Refused, UsageError
from ..framing import is_human
from ..home import peers as registry
from ..home.profiles import Profile, list_profiles
from ..outcome import Outcome
from ..store import ledger
from ..store import runs as runstore
from ..store.runs import RunRow, RunState
from ..store.sessions import BOT_CHAT_TITLE, SessionRow
from .directory import Router, check_message

log = logging.getLogger("backchannel.messaging")
MENTION_WAIT_SECONDS = 120.0
MAX_WAIT_SECONDS = 3600.0
RECEIPT_DETAIL = (
    "accepted and queued: do not resend. The reply will be delivered into this session when it comes; "
    "check_message(run_id) tells its state."
)


@dataclass(frozen=True)
class Origin:
    """The sending side: the session whose turn is running and the run that turn handles."""

    profile: Profile
    session: SessionRow
    run: RunRow

    @property
    def address(self) -> str:
        return f"{self.profile.name}/{self.session.id}"


class Messenger:
    def __init__(self, router: Router) -> None:
        self.router = router
        self.runtime = router.runtime
        self.db = router.db
        self.gateway_id = self.runtime.settings.gateway_id or "local"
        self.runtime.prepare = self.expand_mentions
        self.runtime.jobs.append(self.follow_receipts)

    def origin(self, profile: Profile, session_id: str, run_id: str) -> Origin:
        return Origin(profile, self.router.session(session_id), self.router.run(run_id))

    def _key(self, session_id: str) -> str:
        return f"{self.gateway_id}:{session_id}"

    # --- send ----------------------------------------------------------------------------------

    async def send(self, origin: Origin, address: str, message: str, *, wait: float) -> dict[str, Any]:
        """Deliver `message` from the origin's session to `address`; the reply, a receipt, or an error raised."""
        check_message(message)
        wait = min(max(wait, 0.0), MAX_WAIT_SECONDS)
        parsed = addresses.parse(address)
        if isinstance(parsed, RemoteAddress):
            raise UsageError(f"{address!r} is a peer address: use send_to_peer", code="invalid_address")
        profile_name, target = self.router.find(parsed)  # a Bot Chat is made only once the send is allowed
        target_profile = self.runtime.profile(profile_name)
        target_id = target.id if target is not None else ""
        is_bot = target is None or target.title == BOT_CHAT_TITLE
        target_names = policy.local_names(profile_name, target_id, bot_chat=is_bot)
        sender_names = policy.local_names(
            origin.profile.name, origin.session.id, bot_chat=origin.session.title == BOT_CHAT_TITLE
        )
        waits, hops, chain = self._onward(origin, wait)
        refusal = policy.check(
            sender_policy=origin.profile.config.messaging,
            target_policy=target_profile.config.messaging,
            sender_names=sender_names,
            target_names=target_names,
            sender_key=self._key(origin.session.id),
            target_key=self._key(target_id) if target is not None else "",
            hops=hops,
            chain=chain,
            waits=waits,
            pair_sent=runstore.pair_count(
                self.db,
                sender_profile=origin.profile.name,
                profile=profile_name,
                origin=origin.run.origin or origin.run.id,
                since=time.time() - 3600,
            ),
        )
        if refusal is not None:
            self._refuse(refusal, sender=origin.address, target=target_names[0], message=message, hops=hops, wait=wait)
        delivery = self.router.submit(
            target if target is not None else self.router.bot_chat(profile_name),
            message,
            sender=origin.address,
            hops=hops,
            chain=chain,
            origin=origin.run.origin or origin.run.id,
            sender_profile=origin.profile.name,
            sender_session=origin.session.id,
            wait_seconds=wait,
            wake=not waits,
        )
        run = delivery.run
        if waits and not run.state.terminal:
            async with self.runtime.waiting():
                run = await self.runtime.wait(run.id, wait)
            if not run.state.terminal and not runstore.ask_wake(self.db, run.id):
                run = self.router.run(run.id)  # it ended just now
        return self.result(run, replayed=delivery.replayed)

    def _onward(self, origin: Origin, wait: float) -> tuple[bool, int, tuple[str, ...]]:
        """What a send from this turn carries: whether it waits, its hop, and the chain of waiting sessions."""
        waits = wait > 0
        chain = (*origin.run.chain, self._key(origin.session.id)) if waits else ()
        return waits, origin.run.hops + 1, chain

    def _refuse(
        self, refusal: policy.Refusal, *, sender: str, target: str, message: str, hops: int, wait: float | None
    ) -> NoReturn:
        """Every refusal is explicit: kept in the ledger, and raised to whoever sent."""
        ledger.record_refusal(
            self.db,
            sender=sender,
            target=target,
            code=refusal.code,
            reason=refusal.reason,
            message=message,
            hops=hops,
            wait=wait,
        )
        raise Refused(refusal.reason, code=refusal.code)

    def result(self, run: RunRow, *, replayed: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"run_id": run.id, "to": f"{run.profile}/{run.session_id}", "replayed": replayed}
        if run.state is RunState.COMPLETED:
            return {"status": "replied", **body, "reply": run.reply or ""}
        if run.state.terminal:
            return {"status": run.state.value, **body, "error": run.error, "partial_output": run.reply}
        position = self.router.queue_position(run)
        return {
            "status": "receipt",
            **body,
            "state": run.state.value,
            "queue_position": position,
            "detail": RECEIPT_DETAIL,
        }

    # --- other gateways ------------------------------------------------------------------------

    async def send_peer(self, origin: Origin, target: str, message: str, *, wait: float) -> dict[str, Any]:
        """Deliver to an agent on another gateway (`peer[/profile]`), under the same rules as a local send."""
        check_message(message)
        wait = min(max(wait, 0.0), MAX_WAIT_SECONDS)
        remote = addresses.parse_remote(target.removeprefix("peer:"))
        if remote.session_id is not None:
            raise UsageError(
                f"{target!r}: send_to_peer takes peer or peer/profile (its Bot Chat)", code="invalid_address"
            )
        peer = registry.load(self.runtime.root, remote.peer)
        target_names = (
            [f"peer:{peer.name}/{remote.profile}"]
            if remote.profile
            else [f"peer:{peer.name}", f"peer:{peer.name}/default"]
        )
        waits, hops, chain = self._onward(origin, wait)
        exchange = origin.run.origin or origin.run.id
        sender_policy = origin.profile.config.messaging
        refusal = policy.check(
            sender_policy=sender_policy,
            # The peer applies its own accept list on arrival; here only our limits count.
            target_policy=dataclasses.replace(sender_policy, accept=None),
            sender_names=[origin.address],
            target_names=target_names,
            sender_key=self._key(origin.session.id),
            target_key="",
            hops=hops,
            chain=chain,
            waits=waits,
            pair_sent=ledger.outbound_count(
                self.db,
                sender_profile=origin.profile.name,
                target=target_names[0],
                origin=exchange,
                since=time.time() - 3600,
            ),
        )
        if refusal is not None:
            self._refuse(refusal, sender=origin.address, target=target_names[0], message=message, hops=hops, wait=wait)
        row = ledger.record_outbound(
            self.db,
            sender=origin.address,
            sender_profile=origin.profile.name,
            sender_session=origin.session.id,
            origin=exchange,
            target=target_names[0],
            peer=peer.name,
            agent=remote.profile,
            message=message,
            hops=hops,
            wait=wait,
        )
        from ..net.peer import PeerClient

        client = PeerClient(peer, remote.profile, gateway_id=self.gateway_id)
        try:
            await self.db.durable()  # the ledger holds the message before it leaves
            async with self.runtime.waiting():
                key = keys.agent_send(origin.run.id, target, message, 0)
                result = await client.dm(
                    message, wait=wait, key=key, sender=origin.profile.name, hops=hops, chain=chain
                )
            caps = await client.capabilities()
        except PeerError as exc:
            ledger.update_outbound(self.db, row, state="failed", error=exc.message)
            return {"status": "failed", "to": target_names[0], "code": exc.code, "error": exc.message}
        finally:
            await client.aclose()
        if caps.get("platform") == "backchannel" and caps.get("gateway_id"):
            registry.remember_gateway_id(self.runtime.root, peer.name, str(caps["gateway_id"]))
        ledger.update_outbound(
            self.db,
            row,
            state=result.outcome.value,
            reply=result.reply,
            error=result.error,
            key=result.idempotency_key,
            remote_session_id=result.session_id,
            remote_run_id=result.run_id,
            wake=result.outcome is Outcome.RECEIPT,
        )
        body = {"to": target_names[0], "run_id": result.run_id, "session_id": result.session_id}
        if result.outcome is Outcome.DELIVERED:
            return {"status": "replied", **body, "reply": result.reply or ""}
        if result.outcome is Outcome.RECEIPT:
            return {
                "status": "receipt",
                **body,
                "state": result.state,
                "queue_position": result.queue_position,
                "detail": RECEIPT_DETAIL,
            }
        return {"status": result.outcome.value, **body, "error": result.error}

    def admit(self, session: SessionRow, *, sender: str, hops: int, chain: tuple[str, ...], message: str) -> None:
        """Rules for a message arriving from another gateway: the target's accept list, hops, deadlock."""
        target = self.runtime.profile(session.profile)
        rules = target.config.messaging
        names = [sender]
        if "/" in sender:
            names.insert(0, sender.split("/", 1)[0])
        address = f"{session.profile}/{session.id}"
        reason: policy.Refusal | None = None
        if rules.accept is not None and not policy.matches(rules.accept, names):
            reason = policy.Refusal("not_allowed", f"{session.profile} does not accept messages from {sender}")
        elif hops > rules.max_hops:
            reason = policy.Refusal("hop_limit", f"this message is hop {hops}, past the limit of {rules.max_hops}")
        elif self._key(session.id) in chain:
            reason = policy.Refusal("would_deadlock", f"{address} {policy.DEADLOCK_ADVICE}")
        if reason is not None:
            self._refuse(reason, sender=sender, target=address, message=message, hops=hops, wait=None)

    async def follow_receipts(self, interval: float = 2.0) -> None:
        """Poll peers for messages that got a receipt; when one ends, wake its sender with the reply."""
        while True:
            await asyncio.sleep(interval)
            for item in ledger.awaiting_replies(self.db):
                try:
                    await self._follow(item)
                except BackchannelError as exc:
                    log.info("reply of outbound message %d not available yet: %s", item.id, exc.message)

    async def _follow(self, item: ledger.Outbound) -> None:
        from ..net.peer import PeerClient

        peer = registry.load(self.runtime.root, item.peer)
        async with PeerClient(peer, item.agent, gateway_id=self.gateway_id) as client:
            run = await client.run_status(str(item.remote_run_id))
        if run is not None and run.get("status") in ("queued", "running", "started", "stopping"):
            return
        if run is None:
            state, text = "unknown", "(the peer no longer knows this run: expired or restarted)"
        elif run.get("status") == "completed":
            state, text = "delivered", str(run.get("output") or "")
        else:
            state, text = "failed", f"({run.get('status')}: {run.get('error') or 'no reply'})"
        ledger.update_outbound(
            self.db,
            item.id,
            state=state,
            reply=text if state == "delivered" else None,
            error=None if state == "delivered" else text,
            wake=False,
        )
        if item.sender_session:
            sender = self.router.session(item.sender_session)
            first = item.message.strip().splitlines()[0][:120] if item.message.strip() else ""
            self.router.submit(
                sender,
                f"[Reply to your message {item.remote_run_id} ({first!r})]\n{text}",
                sender=item.target,
                idempotency_key=f"wake:out:{item.id}",
                hops=item.hops + 1,
                origin=item.origin,
            )

    # --- the sibling tools ---------------------------------------------------------------------

    def _own(self, origin: Origin, run_id: str) -> RunRow:
        run = self.router.run(run_id)
        if run.sender_profile != origin.profile.name:
            raise NotFound(f"no message {run_id!r} sent by profile {origin.profile.name!r}", code="not_found")
        return run

    def check(self, origin: Origin, run_id: str) -> dict[str, Any]:
        """A message this profile sent: a local run, or one that went to a peer (as last known here)."""
        try:
            return self.result(self._own(origin, run_id))
        except NotFound:
            sent = ledger.find_outbound(self.db, remote_run_id=run_id, sender_profile=origin.profile.name)
            if sent is None:
                raise
        status = {"delivered": "replied", "receipt": "receipt", "sending": "receipt"}.get(sent.state, sent.state)
        body: dict[str, Any] = {"status": status, "run_id": run_id, "to": sent.target}
        if status == "replied":
            body["reply"] = sent.reply or ""
        elif status == "receipt":
            body["detail"] = RECEIPT_DETAIL
        else:
            body["error"] = sent.error
        return body

    async def cancel(self, origin: Origin, run_id: str) -> dict[str, Any]:
        self._own(origin, run_id)
        return self.result(await self.router.stop(run_id))

    def targets(self, origin: Origin, profile: str | None = None) -> list[dict[str, Any]]:
        """The local sessions this profile may message (its allowlist), with titles and last activity."""
        allow = origin.profile.config.messaging.allow
        names = [profile] if profile else list_profiles(self.router.runtime.root)
        found: list[dict[str, Any]] = []
        for name in names:
            self.router.check_profile(name)
            if policy.matches(allow, [name]) and not any(s.title == BOT_CHAT_TITLE for s in self._sessions(name)):
                found.append({"address": name, "title": BOT_CHAT_TITLE, "last_active": None, "bot_chat": True})
            for s in self._sessions(name):
                bot = s.title == BOT_CHAT_TITLE
                if s.id != origin.session.id and policy.matches(allow, policy.local_names(name, s.id, bot_chat=bot)):
                    found.append(
                        {
                            "address": name if bot else f"{name}/{s.id}",
                            "title": s.title,
                            "last_active": s.updated_at,
                            "bot_chat": bot,
                        }
                    )
        return found

    def _sessions(self, profile: str) -> list[SessionRow]:
        return self.router.sessions(profile, limit=50)

    # --- mentions ------------------------------------------------------------------------------

    async def expand_mentions(self, run: RunRow, profile: Profile) -> str:
        """A person's prompt with @session: mentions answered first, each reply marked with who gave it."""
        if not is_human(run.sender) or "@" not in run.message:
            return run.message
        prompt, found = addresses.mentions(run.message)
        if not found:
            return run.message
        origin = Origin(profile, self.router.session(run.session_id), run)

        async def ask(mention: addresses.Mention) -> str:
            try:
                if isinstance(mention.address, LocalAddress):
                    result = await self.send(origin, str(mention.address), prompt, wait=MENTION_WAIT_SECONDS)
                else:
                    result = await self.send_peer(origin, str(mention.address), prompt, wait=MENTION_WAIT_SECONDS)
            except BackchannelError as exc:
                return f"{mention.token} was refused ({exc.code}): {exc.message}"
            if result["status"] == "replied":
                return f"{mention.token} ({result['to']}) answered:\n{result['reply']}"
            if result["status"] in ("failed", "refused", "unknown") and "error" in result and "run_id" not in result:
                return f"{mention.token} {result['status']}: {result['error']}"
            if result["status"] == "receipt":
                return (
                    f"{mention.token} did not answer within {MENTION_WAIT_SECONDS:.0f}s: run {result['run_id']} "
                    "goes on and its reply will come to this session"
                )
            return f"{mention.token} {result['status']}: {result.get('error') or 'no reply'}"

        answers = await asyncio.gather(*(ask(m) for m in found))
        return prompt + "\n\n[Replies to the mentions in this message]\n" + "\n\n".join(answers)
