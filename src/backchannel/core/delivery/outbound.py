"""Messages to agents on other gateways: dm, run, status, stop, and receipts followed until their reply.

Every message is recorded here before it leaves (and committed), updated with what the peer said,
and settled when its end is known; an agent's message answered with a receipt wakes its sender's
session with the reply when it comes (through `Wakes`, like a local reply).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ... import addresses, deadlines, ids, keys, tracing
from ...errors import (
    BackchannelError,
    Conflict,
    PeerAuthRefused,
    PeerError,
    PeerOutcomeUnknown,
    PeerRefused,
    PeerUnreachable,
    StoreError,
)
from ...events import Event, Other
from ...home import peers as registry
from ...net.link import Envelope, PeerAbout, PeerLink, PeerLinks
from ...outcome import NOT_CONSUMED, Outcome, Result, Run, of_run, said_state, unknown
from ...records import Question
from ...store import outbound as outstore
from ...store.driver import Db
from ..queue.commits import commits
from . import peer_questions
from .wakes import Wakes, failure_text, question_text, reply_text

if TYPE_CHECKING:
    from ...net.a2a_card import AgentCard

log = logging.getLogger("backchannel.outbound")
FOLLOW_SECONDS = 2.0
RECONNECT_SECONDS = 60.0  # a followed peer away longer than this (a restart takes seconds) is given up on
DEFAULT_SENDER_PROFILE = "default"


@dataclass(frozen=True)
class SentFrom:
    """Who sends to a peer: the person (the CLI), or an agent's session with the hop and chain it carries."""

    address: str = "human:cli"
    profile: str | None = None  # an agent's profile; None for the person
    session_id: str | None = None
    exchange: str | None = None  # the exchange the agent's turn is in; None: the person's message begins one
    hops: int = 0
    chain: tuple[str, ...] = ()
    deadline: float | None = None  # when the sender stops waiting: carried to the peer, and no wait goes past it


PERSON = SentFrom()


@dataclass(frozen=True)
class PeerAnswer:
    """What a peer said when asked whether it is there: `answers`, `refused` (our key), `down`, `silent` or
    `failed`, with a detail for a person to read."""

    name: str
    state: str
    detail: str


class Outbound:
    """This gateway's side of every message to another gateway."""

    def __init__(
        self,
        root: Path,
        db: Db,
        wakes: Wakes,
        *,
        links: PeerLinks,
        gateway_id: str,
        called: Callable[[str, str], None] | None = None,
    ) -> None:
        """`called(peer, outcome)`: told of every message and run sent to a peer (the metrics count them)."""
        self.root = root
        self.db = db
        self.wakes = wakes
        self.links = links
        self.gateway_id = gateway_id
        self.called = called or (lambda peer, outcome: None)
        self._untold: set[str] = set()  # questions whose wake-up could not be queued yet (`_tell_asked`)

    def peer(self, name: str) -> registry.Peer:
        return registry.load(self.root, name)

    def client(self, peer: registry.Peer, agent: str | None) -> PeerLink:
        """The link to `agent` on `peer`, in the peer's dialect."""
        return self.links.link(peer, agent)

    async def agent_card(self, peer: registry.Peer, *, timeout: float) -> AgentCard:
        """The A2A agent card at the peer's URL (its well-known card, or the URL itself); PeerError if none."""
        return await self.links.card(peer, timeout=timeout)

    async def sent_count(self, profile: str, target: str, exchange: str, *, since: float) -> int:
        return await outstore.count(self.db, sender_profile=profile, target=target, origin=exchange, since=since)

    async def sent_with_key(self, key: str) -> outstore.Outbound | None:
        """The record of a message sent to a peer under an idempotency key, if any."""
        return await outstore.by_key(self.db, key)

    async def sent(self, peer: str, remote_run_id: str) -> outstore.Outbound | None:
        """Our record of the message that started run `remote_run_id` on `peer`."""
        return await outstore.by_remote_run(self.db, peer, remote_run_id)

    async def sent_by(self, profile: str, remote_run_id: str) -> Result | None:
        """A message this profile sent to a peer, by the run id the peer gave, as last known here."""
        row = await outstore.sent_by(self.db, profile, remote_run_id)
        return _result_of(row) if row is not None else None

    async def probe(self, name: str, *, timeout: float) -> PeerAnswer:
        """Whether a peer answers just now, within `timeout` seconds (never raises for a peer that does not)."""
        peer = self.peer(name)
        try:
            async with self.client(peer, None) as client:
                about = await asyncio.wait_for(client.about(timeout=timeout, strict=True), timeout)
        except TimeoutError:
            return PeerAnswer(name, "silent", f"no answer within {timeout:g}s")
        except PeerAuthRefused as exc:
            return PeerAnswer(name, "refused", exc.message)
        except PeerUnreachable as exc:
            return PeerAnswer(name, "down", exc.message)
        except PeerError as exc:
            return PeerAnswer(name, "failed", exc.message)
        what = f"{about.platform or 'a gateway'} {about.version or ''}".strip()
        return PeerAnswer(name, "answers", what)

    # --- verbs -----------------------------------------------------------------------------------

    @commits
    async def dm(
        self, peer: registry.Peer, agent: str | None, message: str, *, wait: float, key: str, sender: SentFrom = PERSON
    ) -> Result:
        """Deliver into the Bot Chat of `agent` on `peer` and wait up to `wait` seconds for its reply.

        Raises PeerError when the peer cannot be reached or refuses our key (recorded as such); a request
        that may have arrived without an answer is the outcome `unknown`, with the key that asks again."""
        wait = deadlines.bounded(wait, sender.deadline, now=time.time())  # what a peer that knows no deadline is given
        with tracing.span_of(_client_span, peer, agent, sender, message) as span:
            result = await self._dm(peer, agent, message, wait=wait, key=key, sender=sender)
            if span is not None:
                tracing.annotate(span, _result_attributes(result))
            return result

    async def _dm(
        self, peer: registry.Peer, agent: str | None, message: str, *, wait: float, key: str, sender: SentFrom
    ) -> Result:
        new = self._new(peer, agent, message, key, sender, wait)
        row = await outstore.record(self.db, new)
        if (row.message, row.target) != (new.message, new.target):
            raise Conflict(
                f"idempotency key {key!r} was already used for a different message or target ({row.target})",
                code="idempotency_key_conflict",
            )
        if row.state == "delivered":
            return _result_of(row, replayed=True)  # this very message was answered before
        # Anything else is asked again with the same key: the peer answers for the run it already has.
        await self.db.durable()  # the ledger holds the message before it leaves
        try:
            async with self.client(peer, agent) as client:
                result = await client.dm(message, wait=wait, key=key, envelope=self._envelope(sender, row))
                await self._learn_gateway_id(peer, client)
        except PeerOutcomeUnknown as exc:  # it may have arrived: the same key asks again safely
            self.called(peer.name, Outcome.UNKNOWN.value)
            await outstore.update(self.db, row.id, state="unknown", error=exc.message)
            return unknown(row.target, exc.message, idempotency_key=key)
        except PeerError as exc:
            self.called(peer.name, _failure_state(exc))
            await outstore.update(self.db, row.id, state=_failure_state(exc), error=exc.message)
            raise
        self.called(peer.name, result.outcome.value)
        await outstore.update(
            self.db,
            row.id,
            state=result.outcome.value,
            reply=result.reply,
            error=result.error,
            remote_session_id=result.session_id,
            remote_run_id=result.run_id,
            wake=result.outcome is Outcome.RECEIPT and sender.session_id is not None,
        )
        await peer_questions.relay(self.db, row, result)
        return result

    @commits
    async def run(
        self, peer: registry.Peer, agent: str | None, message: str, *, key: str, sender: SentFrom = PERSON
    ) -> tuple[Result, PeerAbout]:
        """Start a turn in the Bot Chat of `agent` on `peer`; (its receipt, what the peer says it is)."""
        with tracing.span_of(_client_span, peer, agent, sender, message) as span:
            result, about = await self._run(peer, agent, message, key=key, sender=sender)
            if span is not None:
                tracing.annotate(span, _result_attributes(result))
            return result, about

    async def _run(
        self, peer: registry.Peer, agent: str | None, message: str, *, key: str, sender: SentFrom
    ) -> tuple[Result, PeerAbout]:
        row = await outstore.record(self.db, self._new(peer, agent, message, key, sender, None))
        await self.db.durable()
        try:
            async with self.client(peer, agent) as client:
                health = await client.health()
                about = (await client.about()).over(health)
                result = await client.start(message, key=key, envelope=self._envelope(sender, row))
        except PeerError as exc:
            self.called(peer.name, _failure_state(exc))
            await outstore.update(self.db, row.id, state=_failure_state(exc), error=exc.message)
            raise
        self.called(peer.name, result.outcome.value)
        await outstore.update(
            self.db, row.id, state="started", remote_session_id=result.session_id, remote_run_id=result.run_id
        )
        return result, about

    @commits
    async def status(self, peer: registry.Peer, run_id: str, *, agent: str | None = None) -> tuple[Result, Run | None]:
        """The state of run `run_id` on `peer` (the agent is known from our record of sending it)."""
        row, agent = await self._sent(peer, run_id, agent)
        async with self.client(peer, agent) as client:
            found = await client.status(run_id)
        return await self._settle(peer, agent, run_id, found, row), found

    async def follow(self, peer: registry.Peer, run_id: str, *, agent: str | None = None) -> AsyncIterator[Event]:
        """The run's events on `peer` until it ends (polling its state when it has no event stream)."""
        _row, agent = await self._sent(peer, run_id, agent)
        async with self.client(peer, agent) as client:
            try:
                async for event in client.events(run_id):
                    yield event
                    if event.ends:
                        return
            except PeerAuthRefused:
                raise
            except PeerError:  # NoEventStream (it does not stream, an expired buffer, an older peer), or it broke
                pass
            # The stream ended before the run did (the peer restarting, say): poll until it ends, riding out
            # a peer that is away for up to RECONNECT_SECONDS; past that, say the outcome is not known.
            lost: float | None = None
            while True:
                try:
                    found = await client.status(run_id)
                except (PeerAuthRefused, PeerRefused):
                    raise
                except PeerError as exc:
                    now = time.monotonic()
                    if lost is None:
                        lost = now
                        yield Other(run_id, "peer.reconnecting", {"error": exc.message})
                    elif now - lost > RECONNECT_SECONDS:
                        raise PeerOutcomeUnknown(
                            f"lost peer {peer.name!r} while following run {run_id} and it did not come back within "
                            f"{RECONNECT_SECONDS:g}s ({exc.message}); the run's outcome is unknown: ask again with "
                            f"`backchannel peer status {peer.name} {run_id}`"
                        ) from exc
                    await asyncio.sleep(0.5)
                    continue
                if lost is not None:
                    lost = None
                    yield Other(run_id, "peer.reconnected", {"status": found.state if found is not None else "unknown"})
                if found is None or found.outcome.settled:
                    return
                await asyncio.sleep(0.5)

    @commits
    async def stop(self, peer: registry.Peer, run_id: str, *, agent: str | None = None) -> tuple[Result, Run]:
        row, agent = await self._sent(peer, run_id, agent)
        async with self.client(peer, agent) as client:
            found = await client.stop(run_id)
        return await self._settle(peer, agent, run_id, found, row), found

    async def answer(self, question: Question, text: str) -> None:
        """Our sender's answer to a question a peer's agent asked (`peer_questions`): sent to that peer as the
        run's follow-up; PeerError when it was not taken."""
        row = await peer_questions.message_of(self.db, question)
        async with self.client(self.peer(row.peer), row.agent) as client:
            key = f"{question.id}-{ids.new_exchange_id()}"  # each attempt its own (one reopened is answered anew)
            await client.answer(question.run_id, question.session_id or row.remote_session_id, text, key=key)

    async def _sent(
        self, peer: registry.Peer, run_id: str, agent: str | None
    ) -> tuple[outstore.Outbound | None, str | None]:
        """Our record of the message that started `run_id` on `peer`, and the agent it went to (unless named)."""
        row = await outstore.by_remote_run(self.db, peer.name, run_id)
        return row, agent if agent is not None else (row.agent if row is not None else None)

    # --- receipts ----------------------------------------------------------------------------------

    async def follow_receipts(self, interval: float = FOLLOW_SECONDS) -> None:
        """Background job: poll peers for agents' messages that got a receipt; wake each sender at the end."""
        while True:
            await asyncio.sleep(interval)
            for row in await outstore.awaiting_replies(self.db):
                try:
                    await self._follow_one(row)
                except BackchannelError as exc:
                    log.info("reply of outbound message %d not available yet: %s", row.id, exc.message)
            try:
                await self.db.durable()
            except StoreError as exc:  # settled again on the next round
                log.warning("outbound replies not saved this round: %s", exc.message)

    async def _follow_one(self, row: outstore.Outbound) -> None:
        peer = self.peer(row.peer)
        async with self.client(peer, row.agent) as client:
            found = await client.status(str(row.remote_run_id))
        await self._settle(peer, row.agent, str(row.remote_run_id), found, row)

    async def _settle(
        self,
        peer: registry.Peer,
        agent: str | None,
        run_id: str,
        found: Run | None,
        row: outstore.Outbound | None,
    ) -> Result:
        """What the peer says of a run, as an outcome; a known end settles our record and wakes its sender."""
        to = addresses.remote(peer.name, agent)
        if found is None:
            error = "the peer does not know this run: expired, restarted, or never started"
            result = unknown(to, error, code="run_not_found", run_id=run_id)
        else:
            result = of_run(to, dataclasses.replace(found, run_id=run_id))
        if row is not None and found is not None:
            asked = await peer_questions.relay(self.db, row, result)
            if asked is not None:
                await self._tell_asked(row, run_id, *asked)
            await peer_questions.moved_on(self.db, row, result)
        if row is None or not result.outcome.settled:
            return result
        done = result.outcome is Outcome.DELIVERED
        failure = None if done else failure_text(str(result.state or result.code), result.error)
        if failure is not None and result.unread:  # the peer says its model never read it: it may be asked again
            failure += f" ({NOT_CONSUMED})"
        if failure is None:
            text = reply_text(run_id, row.message, result.reply or "(no reply)", ours=not result.reply)
        else:
            text = reply_text(run_id, row.message, failure, ours=True)
        if row.wake and row.sender_session:
            woken = await self.wakes.deliver(
                session_id=row.sender_session,
                text=text,
                sender=row.target,
                key=keys.wake_outbound(row.id),
                hops=row.hops + 1,
                exchange=row.origin,
                trace=tracing.kept(row.traceparent, row.tracestate),  # continues the span that sent it
            )
            if woken is None:
                return result  # not settled: the next poll delivers it (the wake's key keeps it to one)
        await outstore.settle(
            self.db,
            row.id,
            state=result.outcome.value,
            reply=result.reply if done else None,
            error=failure,
        )
        return result

    async def _tell_asked(self, row: outstore.Outbound, run_id: str, question: Question, new: bool) -> None:
        """A question the peer's run asks of an agent that had its receipt: into the agent's session as a wake-up,
        once (an agent still waiting when it was asked read it in its send's result, and is not told again). One
        that could not be queued now is tried again on the next poll."""
        if not (row.wake and row.sender_session and row.sender_profile and question.is_open):
            self._untold.discard(question.id)
            return
        if not new and question.id not in self._untold:
            return
        woken = await self.wakes.deliver(
            session_id=row.sender_session,
            text=question_text(run_id, row.message, question.question),
            sender=row.target,
            key=keys.wake_question(row.id, question.id),
            hops=row.hops + 1,
            exchange=row.origin,
            trace=tracing.kept(row.traceparent, row.tracestate),
        )
        if woken is None:
            self._untold.add(question.id)
        else:
            self._untold.discard(question.id)

    # --- helpers -------------------------------------------------------------------------------------

    def _new(
        self,
        peer: registry.Peer,
        agent: str | None,
        message: str,
        key: str,
        sender: SentFrom,
        wait: float | None,
    ) -> outstore.NewOutbound:
        carried = tracing.current_carrier()  # the send's own span: the wake-up of a late reply continues it
        return outstore.NewOutbound(
            sender=sender.address,
            target=addresses.remote(peer.name, agent),
            peer=peer.name,
            agent=agent,
            message=message,
            idempotency_key=key,
            hops=sender.hops,
            wait=wait,
            sender_profile=sender.profile,
            sender_session=sender.session_id,
            origin=sender.exchange or ids.new_exchange_id(),  # a person's message to a peer begins an exchange
            traceparent=carried.traceparent if carried is not None else None,
            tracestate=(carried.tracestate or None) if carried is not None else None,
        )

    def _envelope(self, sender: SentFrom, row: outstore.Outbound) -> Envelope:
        """What a message to a peer carries: its sending profile, hop and chain, and its exchange (its own, named
        as between gateways)."""
        return Envelope(
            sender=sender.profile or DEFAULT_SENDER_PROFILE,
            hops=sender.hops,
            chain=sender.chain,
            exchange=ids.exchange_on_wire(self.gateway_id, row.origin or ids.new_exchange_id()),
            deadline=sender.deadline,
        )

    async def _learn_gateway_id(self, peer: registry.Peer, client: PeerLink) -> None:
        """A Backchannel peer's gateway id, so messages from it are shown under its name here."""
        if peer.gateway_id:
            return
        found = (await client.about()).backchannel_id
        if found:
            registry.remember_gateway_id(self.root, peer.name, found)


def _client_span(
    peer: registry.Peer, agent: str | None, sender: SentFrom, message: str
) -> tuple[str, str, dict[str, object]]:
    """A message to another gateway's agent: `invoke_agent <peer>/<agent>`, a client span whose context the
    request carries (the peer's run continues it)."""
    target = addresses.remote(peer.name, agent)
    return (
        f"invoke_agent {target}",
        "client",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent or "default",
            "server.address": peer.name,
            "backchannel.peer": peer.name,
            "backchannel.sender": sender.address,
            "backchannel.hops": sender.hops,
            "backchannel.chain": list(sender.chain),
            "backchannel.exchange": sender.exchange,
            "backchannel.message": tracing.content(message),
        },
    )


def _result_attributes(result: Result) -> dict[str, object]:
    return {
        "backchannel.outcome": result.outcome.value,
        "backchannel.remote_run_id": result.run_id,
        "gen_ai.conversation.id": result.session_id,
        "error.type": result.code if result.error else None,
        "backchannel.reply": tracing.content(result.reply),
    }


def _failure_state(exc: PeerError) -> str:
    return "unknown" if isinstance(exc, PeerOutcomeUnknown) else "failed"


def _result_of(row: outstore.Outbound, *, replayed: bool = False) -> Result:
    """A message to a peer as our ledger last knew it (its state there is an outcome, or a run state)."""
    run = Run(
        said_state(row.state),
        run_id=row.remote_run_id,
        session_id=row.remote_session_id,
        output=row.reply,
        error=row.error,
        code=row.state,
    )
    return of_run(row.target, run, replayed=replayed, key=row.idempotency_key)
