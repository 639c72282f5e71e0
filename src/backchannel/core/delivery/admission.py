"""The one admit path of every message: the facts gathered once, the policy's check, a refusal recorded, a
hold, the run submitted.

The person's messages, the agents' sends (to a session here or to a peer), arrivals from peers and wake-ups
all pass through `Admission.admit`; the policy (`backchannel.policy`) only decides, on the facts gathered
here from our own records. A message to a peer let through goes on through `Outbound` (its caller's part).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from ... import addresses, deadlines, keys, policy, tracing
from ...addresses import BOT_CHAT_TITLE, RemoteAddress
from ...agent.tools.base import ToolContext
from ...framing import is_human
from ...home.config import GatewayConfig
from ...home.profiles import MessagingPolicy
from ...messages import Attachment
from ...outcome import Result, refused
from ...records import Run, Session
from ...store import exchanges
from ...store import outbound as outstore
from ...store import rates as ratestore
from ...store import refusals as refusalstore
from ...store import runs as runstore
from ...store.driver import Db, Tx
from ...store.runs import Admit, NewRun
from ..queue.queue import RunQueue
from ..queue.steers import STEERABLE_ENGINES
from .directory import Directory
from .rates import SenderRates

PAIR_WINDOW_SECONDS = 3600.0
DAY_SECONDS = 86_400.0  # the window of the daily budgets
EXCHANGE_IDLE_SECONDS = 600.0  # a peer that names no exchange, quiet this long (both ways), starts again at its hop


@dataclass(frozen=True)
class NewContext:
    """A conversation an A2A client starts under a contextId of its own choosing: `caller` is the key's holder
    (`human:a2a`, `peer:NAME`), the same contextId from another caller another conversation."""

    caller: str
    context_id: str


@dataclass(frozen=True)
class Attempt:
    """One message as its sender hands it in; the admit path gathers the rest from our own records.

    kind      person (its sender `human:<surface>`), arrival (`peer:<name>/<profile>`), send (an agent's, from
              the turn `turn`), reply (a wake-up, from the address that answered)
    target    `session`; for an agent's send to a Bot Chat not made yet, `session` None and its `profile`;
              for a send to another gateway, `peer`
    key       the caller's idempotency key (person, arrival: None is the dialect's derived one; reply: the
              wake's own); an agent's send is keyed on its turn, target, text and ordinal here
    exchange  an arrival: the exchange the peer names; a reply: the exchange it belongs to
    wait      how long the sender waits for the outcome (an agent's send: 0 to be woken instead)
    context   a new A2A context: `session` is not written yet (`Directory.unsaved_session`): it is, bound to
              that context, once the message is let through (a refused message starts no conversation)
    files     kept with the run
    scope, retry_window  a keyless message's fingerprint target and retry window (`runs.NewRun`): a client's
              automatic retry, which cannot carry a key, is the same sender's run of the same text to the same
              `scope` (default the session) within `retry_window`"""

    kind: policy.Kind
    sender: str
    text: str
    session: Session | None = None
    profile: str = ""
    peer: RemoteAddress | None = None
    key: str | None = None
    hops: int = 0
    chain: tuple[str, ...] = ()
    exchange: str | None = None
    wait: float | None = None
    turn: ToolContext | None = None
    files: tuple[Attachment, ...] = ()
    context: NewContext | None = None
    steer: bool = False  # given to the target's running turn at its next model step, when it runs one that can
    trace: tracing.Carrier | None = None  # the trace it continues, when not the current span's (a wake-up's)
    scope: str | None = None
    retry_window: float = 0.0
    deadline: float | None = None  # when its sender stops waiting; an agent's send also inherits its turn's

    @classmethod
    def handed_in(
        cls,
        session: Session,
        text: str,
        sender: str,
        *,
        key: str | None = None,
        hops: int = 0,
        chain: tuple[str, ...] = (),
        exchange: str | None = None,
        files: tuple[Attachment, ...] = (),
        context: NewContext | None = None,
        steer: bool = False,
        scope: str | None = None,
        retry_window: float = 0.0,
        deadline: float | None = None,
    ) -> Attempt:
        """A message a transport hands in to `session`: the person's (`human:<surface>`) or, from another
        gateway, its agent's (`peer:<name>/<profile>`, an arrival)."""
        kind: policy.Kind = "person" if is_human(sender) else "arrival"
        return cls(
            kind,
            sender,
            text,
            session=session,
            key=key,
            hops=hops,
            chain=chain,
            exchange=exchange,
            files=files,
            context=context,
            steer=steer,
            scope=scope,
            retry_window=retry_window,
            deadline=deadline,
        )

    @property
    def target_profile(self) -> str:
        return self.session.profile if self.session is not None else self.profile


@dataclass(frozen=True)
class Admitted:
    """What the admit path did: refused (recorded: `refused` is what its sender is told), let through to a
    peer (no run here: Outbound sends it), or a run submitted (`created` False: one filed under the same key).

    `facts` are what the policy decided on (its hop and chain go with a message sent on to a peer)."""

    facts: policy.Attempt
    target: str
    refusal: policy.Refusal | None = None
    run: Run | None = None
    created: bool = False

    @property
    def refused(self) -> Result:
        assert self.refusal is not None
        return refused(self.target, self.refusal.code, self.refusal.reason)


class Admission:
    """The one path from a message handed in to a refusal, a hold or a queued run, for every kind of sender."""

    def __init__(
        self,
        *,
        db: Db,
        queue: RunQueue,
        directory: Directory,
        settings: GatewayConfig,
        gateway_id: str,
        shared: bool = False,
    ) -> None:
        """`shared`: gateways share the store, and count the senders' rates in it."""
        self.db = db
        self.shared = shared
        self.queue = queue
        self.directory = directory
        self.settings = settings
        self.gateway_id = gateway_id
        self.rates = SenderRates(settings.max_runs_per_sender_per_minute)  # the person is never rate-limited

    async def admit(self, attempt: Attempt, *, submit: bool = True) -> Admitted:
        """Decide on `attempt` and act on the decision, inside the caller's commit (on SQLite nothing here
        suspends: every write of it joins one group commit). Without `submit`, only decide (a refusal is recorded
        as any other): what is let through is the caller's to do (an idle notice asked of the target)."""
        rules = None
        if attempt.kind != "reply" and attempt.peer is None:
            # The target's config is read before anything is recorded, whoever sends: a broken file refuses the
            # message at once (invalid_config), on every path alike, rather than queueing it behind a paused profile.
            rules = self.directory.profile(attempt.target_profile).config.messaging
        facts, target, exchange = await self._facts(attempt, rules)
        refusal = policy.check(facts)
        if refusal is not None:
            if tracing.active():
                _refused_span(attempt, facts, target, refusal)
            wait = attempt.wait if attempt.kind == "send" else None
            rate = self._rate_of(attempt, refused=True)
            await self.record_refusal(refusal, facts, target=target, message=attempt.text, wait=wait, rate=rate)
            return Admitted(facts, target, refusal=refusal)
        if attempt.peer is not None or not submit:
            return Admitted(facts, target)
        held = policy.held(facts)
        new, admit = await self._new_run(attempt, facts, target, exchange=exchange, held=held)
        if attempt.steer and self.directory.profile(new.profile).config.model.engine in STEERABLE_ENGINES:
            new = dataclasses.replace(new, steer=True)
        run, created = await self.queue.submit(new, admit=admit, capped=attempt.kind != "reply")
        if created and run.landed == "steered":
            self.queue.steers.add(run.session_id)
        return Admitted(facts, target, run=run, created=created)

    def key(self, session_id: str) -> str:
        """A session's name in wait chains, unique across gateways."""
        return f"{self.gateway_id}:{session_id}"

    def hold_expiry(self, profile: str) -> float:
        return self.directory.profile(profile).config.messaging.hold_expiry_seconds

    async def record_refusal(
        self,
        refusal: policy.Refusal,
        facts: policy.Attempt,
        *,
        target: str,
        message: str,
        wait: float | None,
        rate: Admit | None = None,
    ) -> None:
        """Every refusal is explicit: kept in the ledger once, under the address it was sent to, with an excerpt
        of its text. It counts against its sender's `rate` as a run would: a sender past it is told `rate_limited`
        (LimitReached) and nothing is written, so no key fills the disk with refused messages."""
        await refusalstore.record(
            self.db,
            sender=facts.sender.names[-1],
            target=target,
            code=refusal.code,
            reason=refusal.reason,
            message=message,
            hops=facts.hops,
            wait=wait,
            admit=rate,
        )

    # --- the facts of each kind ------------------------------------------------------------------

    async def _facts(self, attempt: Attempt, rules: MessagingPolicy | None) -> tuple[policy.Attempt, str, str | None]:
        """The policy's facts (`rules`: the local target's), the address a refusal is recorded under, and the
        exchange the run joins."""
        if attempt.kind == "send":
            facts = (
                await self._peer_send(attempt) if attempt.peer is not None else await self._local_send(attempt, rules)
            )
            return facts, facts.target.shown, None
        session = attempt.session
        assert session is not None
        if attempt.kind == "reply":
            facts = policy.Attempt(
                kind="reply", sender=policy.Party([attempt.sender]), target=policy.Party([session.profile])
            )
            return facts, session.profile, attempt.exchange
        target = policy.Party(
            policy.local_names(session.profile, session.id, bot_chat=session.title == BOT_CHAT_TITLE),
            key=self.key(session.id),
            policy=rules,
        )
        if attempt.kind == "person":
            facts = policy.Attempt(
                kind="person",
                sender=policy.Party([attempt.sender]),
                target=target,
                hops=attempt.hops,
                chain=attempt.chain,
            )
            return facts, target.names[-1], None
        exchange = exchanges.here(self.gateway_id, attempt.exchange) if attempt.exchange else None
        hops, chain, arrived = await self._peer_facts(attempt, session, exchange)
        facts = policy.Attempt(
            kind="arrival",
            sender=policy.Party(addresses.remote_names(attempt.sender)),
            target=target,
            hops=hops,
            chain=chain,
            arrived=arrived,
        )
        return facts, target.names[-1], exchange

    async def _local_send(self, attempt: Attempt, rules: MessagingPolicy | None) -> policy.Attempt:
        turn = attempt.turn
        assert turn is not None
        session, profile = attempt.session, attempt.target_profile
        waits = (attempt.wait or 0.0) > 0
        return policy.Attempt(
            kind="send",
            sender=await self.turn_party(turn),
            target=policy.Party(
                policy.local_names(
                    profile,
                    session.id if session is not None else "",
                    bot_chat=session is None or session.title == BOT_CHAT_TITLE,
                ),
                key=self.key(session.id) if session is not None else "",
                policy=rules,
            ),
            hops=turn.hops + 1,
            chain=(*turn.chain, self.key(turn.session_id)) if waits else (),
            waits=waits,
            pair_sent=await runstore.pair_count(
                self.db,
                sender_profile=turn.profile.name,
                profile=profile,
                origin=turn.exchange,
                since=time.time() - PAIR_WINDOW_SECONDS,
            ),
            spent=await self._spent(turn),
        )

    async def _spent(self, turn: ToolContext) -> policy.Spending:
        """What the sending turn's budget counts, read only for the budgets its profile sets."""
        budget = turn.profile.config.messaging.budget
        exchange = None
        if budget.tokens_per_exchange is not None:
            exchange = await runstore.exchange_tokens(self.db, turn.exchange)
        if budget.tokens_per_day is None and budget.usd_per_day is None:
            return policy.Spending(exchange_tokens=exchange)
        tokens, usd = await runstore.profile_spent(self.db, turn.profile.name, time.time() - DAY_SECONDS)
        return policy.Spending(exchange_tokens=exchange, day_tokens=tokens, day_usd=usd)

    async def _peer_send(self, attempt: Attempt) -> policy.Attempt:
        """An agent's send to another gateway: the target has no rules here; the pair's count and whether that
        peer waits on this turn (or on one waiting for it) come from our own records, whatever chain it sent."""
        turn, peer = attempt.turn, attempt.peer
        assert turn is not None and peer is not None
        to = addresses.remote(peer.peer, peer.profile)
        waits = (attempt.wait or 0.0) > 0
        now = time.time()
        waited_on = False
        if waits:
            local = f"{self.gateway_id}:"
            sessions = [turn.session_id, *(e.removeprefix(local) for e in turn.chain if e.startswith(local))]
            waited_on = await exchanges.waited_on_by(self.db, peer.peer, sessions, now=now) is not None
        return policy.Attempt(
            kind="send",
            sender=await self.turn_party(turn),
            target=policy.Party([to] if peer.profile else [to, addresses.remote(peer.peer, "default")]),
            hops=turn.hops + 1,
            chain=(*turn.chain, self.key(turn.session_id)) if waits else (),
            waits=waits,
            pair_sent=await outstore.count(
                self.db,
                sender_profile=turn.profile.name,
                target=to,
                origin=turn.exchange,
                since=now - PAIR_WINDOW_SECONDS,
            ),
            waited_on=waited_on,
            spent=await self._spent(turn),
        )

    async def _peer_facts(
        self, attempt: Attempt, session: Session, exchange: str | None
    ) -> tuple[int, tuple[str, ...], int]:
        """An arrival's hop, chain and count from our own records: its headers are the peer's word only.

        The hop is never lower than its exchange already reached here, whichever peer name (key) the exchange's
        messages came or went by: a fresh exchange (a person's new message) starts at its own hop. A peer that
        names no exchange (a Hermes gateway) is one exchange with us: never lower than what it reached within
        EXCHANGE_IDLE_SECONDS. The chain gets our sessions that wait on this peer right now; the count is what
        this peer sent the profile within the hour, whatever exchange it names."""
        peer = addresses.peer_of(attempt.sender)
        now = time.time()
        if exchange is not None:
            floor = await exchanges.exchange_floor(self.db, exchange)
        else:
            floor = await exchanges.hop_floor(self.db, peer, since=now - EXCHANGE_IDLE_SECONDS)
        hops = max(attempt.hops, floor)
        ours = [self.key(s) for s in await exchanges.sessions_waiting_on(self.db, peer, now=now)]
        chain = tuple(dict.fromkeys((*attempt.chain, *ours)))
        arrived = await exchanges.arrivals(self.db, peer, session.profile, since=now - PAIR_WINDOW_SECONDS)
        return hops, chain, arrived

    async def turn_party(self, turn: ToolContext) -> policy.Party:
        """The sending end of an agent's message: its session's addresses, key and its profile's rules."""
        return policy.Party(
            policy.local_names(
                turn.profile.name, turn.session_id, bot_chat=await self.directory.is_bot_chat(turn.session_id)
            ),
            key=self.key(turn.session_id),
            policy=turn.profile.config.messaging,
        )

    # --- the run -------------------------------------------------------------------------------

    async def _new_run(
        self, attempt: Attempt, facts: policy.Attempt, target: str, *, exchange: str | None, held: bool
    ) -> tuple[NewRun, Admit | None]:
        """The run a message let through is recorded as, and the rate it is admitted within."""
        carried = attempt.trace or tracing.current_carrier()  # the trace the run continues, kept with it
        traceparent, tracestate = (carried.traceparent, carried.tracestate or None) if carried else (None, None)
        if attempt.kind == "reply":
            session = attempt.session
            assert session is not None and attempt.key is not None
            new = NewRun(
                sender=attempt.sender,
                profile=session.profile,
                session_id=session.id,
                message=attempt.text,
                idempotency_key=attempt.key,
                hops=attempt.hops,
                origin=exchange,
                traceparent=traceparent,
                tracestate=tracestate,
            )
            return new, None
        if attempt.kind == "send":
            turn = attempt.turn
            assert turn is not None
            # A Bot Chat is made only once the send is let through.
            session = attempt.session or await self.directory.bot_chat(attempt.profile)
            new = NewRun(
                sender=turn.address,
                profile=session.profile,
                session_id=session.id,
                message=attempt.text,
                idempotency_key=keys.agent_send(turn.run_id, target, attempt.text, turn.ordinal(target, attempt.text)),
                hops=facts.hops,
                chain=tuple(facts.chain),
                origin=turn.exchange,
                sender_profile=turn.profile.name,
                sender_session=turn.session_id,
                wait_seconds=attempt.wait,
                wake=not facts.waits,
                held=held,
                ttl_seconds=self.hold_expiry(session.profile) if held else None,
                traceparent=traceparent,
                tracestate=tracestate,
                deadline=deadlines.inherited(turn.deadline, attempt.deadline, now=time.time()),
            )
            return new, self._rate_of(attempt)
        human = is_human(attempt.sender)
        session = await self._open_context(attempt) if attempt.context is not None else attempt.session
        assert session is not None
        new = NewRun(
            sender=attempt.sender,
            profile=session.profile,
            session_id=session.id,
            message=attempt.text,
            idempotency_key=keys.of_caller(attempt.sender, attempt.key),  # one caller's key is its own
            hops=facts.hops,
            chain=tuple(facts.chain),
            origin=exchange,  # a peer's message joins the exchange it names; a person's begins its own
            wait_seconds=None if human else attempt.wait,  # a peer's wait: what may deadlock
            held=held,
            ttl_seconds=self.hold_expiry(session.profile) if held else None,
            files=attempt.files,
            traceparent=traceparent,
            tracestate=tracestate,
            scope=attempt.scope,
            retry_window=attempt.retry_window,
            deadline=attempt.deadline,
        )
        return new, self._rate_of(attempt)

    async def _open_context(self, attempt: Attempt) -> Session:
        """The session of a new A2A context, written now that its first message is let through (a peer past its
        rate starts none: the run would be refused)."""
        assert attempt.context is not None and attempt.session is not None
        if not is_human(attempt.sender):
            self.rates.check(attempt.sender, also=addresses.head(attempt.sender))
        return await self.directory.bind_context(
            attempt.context.caller,
            attempt.session.profile,
            attempt.context.context_id,
            session_id=attempt.session.id,
            limit=self.settings.max_sessions_per_profile,
        )

    def _rate_of(self, attempt: Attempt, *, refused: bool = False) -> Admit | None:
        """The rate a message of `attempt`'s sender counts against: an agent's send its session's, a peer's
        arrival its own and its key's; none for the person or a wake-up. A `refused` arrival counts against its
        key too (as a malformed request does), so no key passes its rate by naming another sending profile."""
        if attempt.kind == "send":
            assert attempt.turn is not None
            return self._rated(attempt.turn.address)
        if attempt.kind == "reply" or is_human(attempt.sender):
            return None
        return self._rated(attempt.sender, also=addresses.head(attempt.sender), count_also=refused)

    def _rated(self, sender: str, *, also: str | None = None, count_also: bool = False) -> Admit:
        """A new run of `sender` within its rate (a peer's: also within that of its key, `peer:NAME`, which its
        malformed requests and, with `count_also`, its refused messages count against), counted here and, on a
        shared store, across the gateways."""
        counted = (sender, also) if count_also and also is not None and also != sender else (sender,)

        async def admit(tx: Tx) -> None:
            self.rates.check(sender, also=also)
            if self.shared:
                for who in counted:
                    retry = await ratestore.admit(self.db, tx, who, per_minute=self.rates.per_minute, now=time.time())
                    if retry is not None:
                        raise self.rates.refusal(who, retry)
            for who in counted:
                self.rates.record(who)

        return admit


def _refused_span(attempt: Attempt, facts: policy.Attempt, target: str, refusal: policy.Refusal) -> None:
    """A refused message's span: the invocation that did not happen, with the refusal's code."""
    now = time.time()
    tracing.whole(
        f"invoke_agent {attempt.target_profile or target}",
        start_at=now,
        end_at=now,
        kind="server" if attempt.kind in ("person", "arrival") else "internal",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": attempt.target_profile or target,
            "gen_ai.conversation.id": attempt.session.id if attempt.session is not None else None,
            "backchannel.sender": attempt.sender,
            "backchannel.target": target,
            "backchannel.hops": facts.hops,
            "backchannel.chain": list(facts.chain) or None,
            "backchannel.outcome": "refused",
            "backchannel.refusal.code": refusal.code,
            "backchannel.message": tracing.content(attempt.text),
        },
        error=refusal.reason,
        code=refusal.code,
    )
