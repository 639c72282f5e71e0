"""Who may message whom: allowlists, accept lists, hop limit, deadlock, self-send and pair budget.

Pure decisions; the messenger records refusals and acts on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from .home.profiles import MessagingPolicy

DEADLOCK_ADVICE = (
    "is already waiting for your answer (it is in the chain of turns blocked on this one): "
    "asking it would wait forever. Answer it instead of asking; if you need more, say so in your reply."
)


@dataclass(frozen=True)
class Refusal:
    code: str  # not_allowed | hop_limit | would_deadlock | pair_budget | self_send
    reason: str


def matches(patterns: Iterable[str], names: Sequence[str]) -> bool:
    """Glob patterns over addresses. A pattern reaches a remote address only when it starts with `peer:`."""
    for pattern in patterns:
        remote_pattern = pattern.startswith("peer:")
        for name in names:
            if name.startswith("peer:") != remote_pattern:
                continue
            if fnmatchcase(name, pattern):
                return True
    return False


def local_names(profile: str, session_id: str, *, bot_chat: bool) -> list[str]:
    """The addresses a local session answers to: `profile/id`, and `profile` for a Bot Chat."""
    return [profile, f"{profile}/{session_id}"] if bot_chat else [f"{profile}/{session_id}"]


def check(
    *,
    sender_policy: MessagingPolicy,
    target_policy: MessagingPolicy,
    sender_names: Sequence[str],
    target_names: Sequence[str],
    sender_key: str,
    target_key: str,
    hops: int,
    chain: Sequence[str],
    waits: bool,
    pair_sent: int,
) -> Refusal | None:
    """The first reason to refuse a send, or None. `hops` is the new run's; `pair_sent` what this pair already sent."""
    shown = target_names[0]
    if sender_key == target_key:
        return Refusal("self_send", "a session cannot message itself; answer in your own reply instead")
    if not matches(sender_policy.allow, target_names):
        allow = ", ".join(sender_policy.allow) or "nothing (deny by default)"
        return Refusal(
            "not_allowed",
            f"{shown} is not in this profile's agent.session_messaging.allow (allowed: {allow})",
        )
    if target_policy.accept is not None and not matches(target_policy.accept, sender_names):
        return Refusal("not_allowed", f"{shown} does not accept messages from {sender_names[-1]} (its accept list)")
    limit = min(sender_policy.max_hops, target_policy.max_hops)
    if hops > limit:
        return Refusal("hop_limit", f"this message would be hop {hops}, past the limit of {limit} (max_hops)")
    if waits and target_key in chain:
        return Refusal("would_deadlock", f"{shown} {DEADLOCK_ADVICE}")
    budget = sender_policy.pair_budget_per_hour
    if pair_sent >= budget:
        return Refusal(
            "pair_budget",
            f"this profile already sent {pair_sent} messages to {target_names[0].split('/')[0]} in this exchange "
            f"within the hour (pair_budget_per_hour {budget}); wait for your person",
        )
    return None
