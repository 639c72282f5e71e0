"""Who may message whom, decided in one pure function for every kind of message.

    send      an agent's session sends (to a local session, or to a peer: then the target has no policy here)
    arrival   a message arrives from another gateway (its sender's own gateway applied the sender's rules)
    reply     a reply or wake-up: the answer to a message the sender itself sent; never refused
    person    the person's own message (CLI, API key): not limited by any list

The delivery service gathers the facts (names, keys, counts) and records every refusal; this module
only decides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

from . import addresses
from .addresses import remote_names as remote_names  # a remote party's names, with the grammar
from .home.profiles import MessagingPolicy

Kind = Literal["send", "arrival", "reply", "person"]

DEADLOCK_ADVICE = (
    "is already waiting for your answer (it is in the chain of turns blocked on this one): "
    "asking it would wait forever. Answer it instead of asking; if you need more, say so in your reply."
)


@dataclass(frozen=True)
class Refusal:
    code: str  # not_allowed | hop_limit | would_deadlock | pair_budget | inbound_budget | self_send | budget_exhausted
    reason: str


@dataclass(frozen=True)
class Party:
    """One end of a message: the addresses it answers to (the most specific last), its key in wait
    chains, and its messaging rules when it is one of this gateway's profiles (None otherwise)."""

    names: Sequence[str]
    key: str = ""
    policy: MessagingPolicy | None = None

    @property
    def shown(self) -> str:
        return self.names[0] if self.names else "?"


@dataclass(frozen=True)
class Spending:
    """What the sender has spent, as its budget counts it: tokens of the exchange (every run since the person's
    message), and tokens and US dollars of its profile's turns in the last 24 hours (None: not counted)."""

    exchange_tokens: int | None = None
    day_tokens: int | None = None
    day_usd: float | None = None


@dataclass(frozen=True)
class Attempt:
    """The facts of one message: who, to whom, its hop, the chain of turns waiting on it, whether the
    sender waits for the reply, how many agent-sent messages this pair already exchanged, and for an
    arrival how many this peer already sent the profile."""

    kind: Kind
    sender: Party
    target: Party
    hops: int = 0
    chain: Sequence[str] = ()
    waits: bool = False
    pair_sent: int = 0
    arrived: int = 0  # an arrival: what this peer key already sent this profile within the hour
    waited_on: bool = False  # a send to a peer: our records show that peer waiting on the sender's chain
    spent: Spending = Spending()  # a send: what its sender's budget counts


@dataclass(frozen=True)
class Target:
    """A local address an agent may message: one session, or a profile's Bot Chat (`session_id` None when it
    is not made yet: the first message makes it)."""

    address: str
    session_id: str | None
    bot_chat: bool


def matches(patterns: Iterable[str], names: Sequence[str]) -> bool:
    """Glob patterns over addresses. A pattern reaches a remote address only when it starts with `peer:`. A local
    pattern without a `/` names profiles: `research` is every session of research, as a person reads it
    (`research/<id>` is one session)."""
    for pattern in patterns:
        remote_pattern = addresses.is_remote(pattern)
        whole_profiles = not remote_pattern and "/" not in pattern
        for name in names:
            if addresses.is_remote(name) != remote_pattern:
                continue
            if fnmatchcase(addresses.head(name) if whole_profiles else name, pattern):
                return True
    return False


def local_names(profile: str, session_id: str, *, bot_chat: bool) -> list[str]:
    """The addresses a local session answers to: `profile/id`, and `profile` for a Bot Chat."""
    return [profile, f"{profile}/{session_id}"] if bot_chat else [f"{profile}/{session_id}"]


def check(attempt: Attempt) -> Refusal | None:
    """The first reason to refuse the message, or None to let it through: the rules of every message (the
    sender's allow list for a send, the target's accept list, the hop limit, a chain that waits on the target),
    then those of its kind (an agent's send: its budgets and a wait that would never end; an arrival: the
    target's inbound budget)."""
    if attempt.kind in ("reply", "person"):
        return None  # an answer to what the sender asked, or the person's own words: never refused here
    of_kind = _SEND_RULES if attempt.kind == "send" else _ARRIVAL_RULES if attempt.kind == "arrival" else ()
    for rule in (*_RULES, *of_kind):
        if (refusal := rule(attempt)) is not None:
            return refusal
    return None


def _allowed(attempt: Attempt) -> Refusal | None:
    """A send: never to the sender itself, and only to what its allow list names."""
    sender, target = attempt.sender, attempt.target
    if attempt.kind != "send":
        return None
    if sender.key and sender.key == target.key:
        return Refusal("self_send", "a session cannot message itself; answer in your own reply instead")
    allow = sender.policy.allow if sender.policy is not None else ()
    if matches(allow, target.names):
        return None
    listed = ", ".join(allow) or "nothing (deny by default)"
    return Refusal(
        "not_allowed",
        f"{attempt.target.shown} is not in this profile's agent.session_messaging.allow (allowed: {listed})",
    )


def _accepted(attempt: Attempt) -> Refusal | None:
    rules = attempt.target.policy
    if rules is None or rules.accept is None or matches(rules.accept, attempt.sender.names):
        return None
    return Refusal(
        "not_allowed",
        f"{attempt.target.shown} does not accept messages from {attempt.sender.names[-1]} (its accept list)",
    )


def _within_hops(attempt: Attempt) -> Refusal | None:
    limits = [p.max_hops for p in (attempt.sender.policy, attempt.target.policy) if p is not None]
    if not limits or attempt.hops <= min(limits):
        return None
    return Refusal("hop_limit", f"this message would be hop {attempt.hops}, past the limit of {min(limits)} (max_hops)")


def _no_chain_deadlock(attempt: Attempt) -> Refusal | None:
    """A target that the chain of waiting sessions already holds (an arrival's chain is waiting on it)."""
    target = attempt.target
    waits_on_target = attempt.waits or attempt.kind == "arrival"
    if waits_on_target and target.key and target.key in attempt.chain:
        return Refusal("would_deadlock", f"{target.shown} {DEADLOCK_ADVICE}")
    return None


def _pair_budget(attempt: Attempt) -> Refusal | None:
    rules = attempt.sender.policy
    if rules is None or attempt.pair_sent < rules.pair_budget_per_hour:
        return None
    return Refusal(
        "pair_budget",
        f"this profile already sent {_messages(attempt.pair_sent)} to {addresses.head(attempt.target.shown)} in this "
        f"exchange within the hour (pair_budget_per_hour {rules.pair_budget_per_hour}); wait for your person",
    )


def _spend_budget(attempt: Attempt) -> Refusal | None:
    return _over_budget(attempt.sender.policy, attempt.spent) if attempt.sender.policy is not None else None


def _no_wait_deadlock(attempt: Attempt) -> Refusal | None:
    """A wait on a peer that waits on this turn (or on one waiting for it) never ends, whatever chain it sent."""
    if attempt.waits and attempt.waited_on:
        return Refusal("would_deadlock", f"{addresses.head(attempt.target.shown)} {DEADLOCK_ADVICE}")
    return None


def _inbound_budget(attempt: Attempt) -> Refusal | None:
    rules = attempt.target.policy
    if rules is None or attempt.arrived < rules.inbound_budget_per_hour:
        return None
    return Refusal(
        "inbound_budget",
        f"{attempt.sender.names[0]} already sent {_messages(attempt.arrived)} to {addresses.head(attempt.target.shown)}"
        f" within the hour (inbound_budget_per_hour {rules.inbound_budget_per_hour}); its person can raise it",
    )


Rule = Callable[[Attempt], Refusal | None]
_RULES: tuple[Rule, ...] = (_allowed, _accepted, _within_hops, _no_chain_deadlock)
_SEND_RULES: tuple[Rule, ...] = (_pair_budget, _spend_budget, _no_wait_deadlock)
_ARRIVAL_RULES: tuple[Rule, ...] = (_inbound_budget,)


def _over_budget(rules: MessagingPolicy, spent: Spending) -> Refusal | None:
    """The first of the sender's budgets that what it spent reached, as a refusal naming both."""
    budget = rules.budget
    key = "agent.session_messaging.budget"
    per_exchange = budget.tokens_per_exchange
    if per_exchange is not None and spent.exchange_tokens is not None and spent.exchange_tokens >= per_exchange:
        return Refusal(
            "budget_exhausted",
            f"this exchange already used {spent.exchange_tokens:,} tokens ({key}.tokens_per_exchange "
            f"{per_exchange:,}); answer with what you have, or wait for your person",
        )
    if budget.tokens_per_day is not None and spent.day_tokens is not None and spent.day_tokens >= budget.tokens_per_day:
        return Refusal(
            "budget_exhausted",
            f"this profile's turns used {spent.day_tokens:,} tokens in the last 24 hours ({key}.tokens_per_day "
            f"{budget.tokens_per_day:,}); its person can raise it",
        )
    if budget.usd_per_day is not None and spent.day_usd is not None and spent.day_usd >= budget.usd_per_day:
        return Refusal(
            "budget_exhausted",
            f"this profile's turns cost ${spent.day_usd:,.4f} in the last 24 hours ({key}.usd_per_day "
            f"${budget.usd_per_day:,.2f}); its person can raise it",
        )
    return None


def _messages(count: int) -> str:
    return f"{count} message" if count == 1 else f"{count} messages"


def held(attempt: Attempt) -> bool:
    """Whether a message let through waits for the target's person (the target's `hold` list names its sender)."""
    rules = attempt.target.policy
    if rules is None or attempt.kind not in ("send", "arrival") or not rules.hold:
        return False
    return matches(rules.hold, attempt.sender.names)


def targets(sender: Party, profile: str, rules: MessagingPolicy, sessions: Sequence[tuple[str, bool]]) -> list[Target]:
    """What an agent (`sender`, a local party) may message of `profile`, whose `sessions` are given as (id, is
    its Bot Chat): nothing when its accept list refuses the sender; else its Bot Chat, listed before it is made,
    and each session the sender's allow list names, never the sender's own."""
    if rules.accept is not None and not matches(rules.accept, sender.names):
        return []
    allow = sender.policy.allow if sender.policy is not None else ()
    found: list[Target] = []
    if matches(allow, [profile]) and not any(bot for _, bot in sessions):
        found.append(Target(profile, None, bot_chat=True))
    own = sender.names[-1] if sender.names else None
    for session_id, bot in sessions:
        names = local_names(profile, session_id, bot_chat=bot)
        if names[-1] != own and matches(allow, names):
            found.append(Target(names[0], session_id, bot_chat=bot))
    return found
