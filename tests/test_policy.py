"""policy.check and its helpers, directly: who may message whom (DESIGN section 5), one pure function."""

from __future__ import annotations

from typing import Any

import pytest

from backchannel.home.profiles import MessagingPolicy
from backchannel.policy import (
    DEADLOCK_ADVICE,
    Attempt,
    Party,
    Refusal,
    Target,
    check,
    local_names,
    matches,
    remote_names,
    targets,
)

pytestmark = pytest.mark.quick  # pure: no home on disk, no process, no gateway (make quick)

OPEN = MessagingPolicy(allow=("*", "peer:*"))  # may message anyone, accepts anyone, max_hops 6, budget 30
DENY_ALL = MessagingPolicy(allow=(), accept=(), max_hops=0, pair_budget_per_hour=0)

ALICE_KEY = "gw-a:20260101_000000_aaaaaa"
BOB_KEY = "gw-a:20260101_000000_bbbbbb"


def alice(policy: MessagingPolicy | None = OPEN, key: str = ALICE_KEY) -> Party:
    return Party(local_names("alice", "20260101_000000_aaaaaa", bot_chat=True), key=key, policy=policy)


def bob(policy: MessagingPolicy | None = OPEN, key: str = BOB_KEY) -> Party:
    return Party(local_names("bob", "20260101_000000_bbbbbb", bot_chat=True), key=key, policy=policy)


def send(sender: Party | None = None, target: Party | None = None, **facts: Any) -> Refusal | None:
    return check(Attempt("send", sender or alice(), target or bob(), **facts))


def arrival(sender: str, target: Party | None = None, **facts: Any) -> Refusal | None:
    return check(Attempt("arrival", Party(remote_names(sender)), target or bob(), **facts))


def code(refusal: Refusal | None) -> str | None:
    return refusal.code if refusal is not None else None


# --- reply and person: never refused ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["reply", "person"])
def test_reply_and_person_are_never_refused_whatever_the_rules(kind: str) -> None:
    same = Party(["alice"], key=ALICE_KEY, policy=DENY_ALL)
    attempt = Attempt(
        kind,  # type: ignore[arg-type]
        sender=same,
        target=Party(["alice"], key=ALICE_KEY, policy=DENY_ALL),
        hops=999,
        chain=(ALICE_KEY, BOB_KEY),
        waits=True,
        pair_sent=10_000,
    )
    assert check(attempt) is None


@pytest.mark.parametrize("kind", ["reply", "person"])
def test_reply_and_person_pass_a_target_that_accepts_nobody(kind: str) -> None:
    attempt = Attempt(kind, sender=Party(["peer:x/y"]), target=bob(DENY_ALL), hops=999, chain=(BOB_KEY,))  # type: ignore[arg-type]
    assert check(attempt) is None


def test_a_send_with_the_same_facts_as_the_reply_above_is_refused() -> None:
    """The control for the two tests above: the facts they use do refuse a send."""
    assert check(Attempt("send", sender=bob(DENY_ALL), target=bob(DENY_ALL), hops=999)) is not None


# --- send: self_send -------------------------------------------------------------------------------


def test_a_session_cannot_send_to_itself() -> None:
    refusal = send(alice(), alice())
    assert code(refusal) == "self_send"


def test_self_send_needs_a_non_empty_key_on_both_sides() -> None:
    # a target session that does not exist yet has no key: two empty keys are not "the same session"
    assert send(alice(key=""), bob(key="")) is None


def test_different_keys_are_not_a_self_send() -> None:
    assert send(alice(), bob()) is None


# --- send: the sender's allow ----------------------------------------------------------------------


def test_an_empty_allow_refuses_everything_and_says_so() -> None:
    refusal = send(alice(MessagingPolicy()), bob())
    assert code(refusal) == "not_allowed"
    assert refusal is not None and "deny by default" in refusal.reason


def test_a_sender_without_a_policy_may_send_nowhere() -> None:
    assert code(send(alice(None), bob())) == "not_allowed"


def test_the_allow_refusal_lists_what_is_allowed_and_names_the_target() -> None:
    refusal = send(alice(MessagingPolicy(allow=("builds", "assistant/*"))), bob())
    assert refusal is not None and refusal.code == "not_allowed"
    assert "builds, assistant/*" in refusal.reason
    assert "bob" in refusal.reason
    assert "allow" in refusal.reason


@pytest.mark.parametrize("pattern", ["bob", "bob/*", "b*", "bob/20260101_000000_bbbbbb"])
def test_a_matching_allow_pattern_lets_the_send_through(pattern: str) -> None:
    assert send(alice(MessagingPolicy(allow=(pattern,))), bob()) is None


def test_allow_bob_reaches_every_session_of_bob_and_bob_slash_an_id_only_that_one() -> None:
    target = Party(local_names("bob", "20260101_000000_cccccc", bot_chat=False), key="gw-a:c", policy=OPEN)
    assert send(alice(MessagingPolicy(allow=("bob",))), target) is None
    assert send(alice(MessagingPolicy(allow=("bob/*",))), target) is None
    assert send(alice(MessagingPolicy(allow=("b*",))), target) is None  # a glob without `/` names profiles too
    assert code(send(alice(MessagingPolicy(allow=("bob/20260101_000000_dddddd",))), target)) == "not_allowed"
    assert code(send(alice(MessagingPolicy(allow=("bobby",))), target)) == "not_allowed"


# --- send: the target's accept ---------------------------------------------------------------------


def test_accept_none_lets_any_allowed_sender_in() -> None:
    assert send(alice(), bob(MessagingPolicy(accept=None))) is None


def test_an_accept_list_that_misses_the_sender_refuses() -> None:
    refusal = send(alice(), bob(MessagingPolicy(accept=("research",))))
    assert refusal is not None and refusal.code == "not_allowed"
    assert "accept" in refusal.reason
    assert "alice/20260101_000000_aaaaaa" in refusal.reason  # the sender's most specific name


def test_an_empty_accept_list_refuses_every_sender() -> None:
    assert code(send(alice(), bob(MessagingPolicy(accept=())))) == "not_allowed"


@pytest.mark.parametrize("pattern", ["alice", "alice/20260101_000000_aaaaaa", "alice/*"])
def test_accept_matches_any_of_the_senders_names(pattern: str) -> None:
    assert send(alice(), bob(MessagingPolicy(accept=(pattern,)))) is None


def test_accept_of_a_profile_name_takes_every_session_of_that_profile_and_of_a_session_only_that_one() -> None:
    sender = Party(local_names("alice", "20260101_000000_dddddd", bot_chat=False), key="gw-a:d", policy=OPEN)
    assert send(sender, bob(MessagingPolicy(accept=("alice",)))) is None
    assert send(sender, bob(MessagingPolicy(accept=("alice/20260101_000000_dddddd",)))) is None
    assert code(send(sender, bob(MessagingPolicy(accept=("alice/20260101_000000_eeeeee",))))) == "not_allowed"
    assert code(send(sender, bob(MessagingPolicy(accept=("carol",))))) == "not_allowed"


# --- send: hop_limit -------------------------------------------------------------------------------


@pytest.mark.parametrize(("sender_hops", "target_hops"), [(2, 5), (5, 2)])
def test_the_hop_limit_is_the_lower_of_both_max_hops(sender_hops: int, target_hops: int) -> None:
    sender = alice(MessagingPolicy(allow=("*",), max_hops=sender_hops))
    target = bob(MessagingPolicy(max_hops=target_hops))
    assert send(sender, target, hops=2) is None  # exactly at the limit passes
    refusal = send(sender, target, hops=3)
    assert refusal is not None and refusal.code == "hop_limit"
    assert "limit of 2" in refusal.reason


def test_a_hop_past_the_default_limit_is_refused() -> None:
    assert send(hops=6) is None
    assert code(send(hops=7)) == "hop_limit"


# --- send: would_deadlock --------------------------------------------------------------------------


def test_a_waiting_send_to_a_session_in_the_chain_would_deadlock() -> None:
    refusal = send(chain=("gw-b:x", BOB_KEY, ALICE_KEY), waits=True)
    assert refusal is not None and refusal.code == "would_deadlock"
    assert "Answer it instead of asking" in refusal.reason
    assert refusal.reason.startswith("bob ")


def test_a_send_that_does_not_wait_may_go_to_a_session_in_the_chain() -> None:
    assert send(chain=(BOB_KEY, ALICE_KEY), waits=False) is None


def test_a_waiting_send_to_a_session_outside_the_chain_passes() -> None:
    assert send(chain=("gw-b:x", ALICE_KEY), waits=True) is None


def test_a_target_without_a_key_never_deadlocks() -> None:
    assert send(target=bob(key=""), chain=("",), waits=True) is None


# --- send: pair_budget -----------------------------------------------------------------------------


def test_the_pair_budget_refuses_at_the_budget_and_passes_one_below() -> None:
    sender = alice(MessagingPolicy(allow=("*",), pair_budget_per_hour=5))
    assert send(sender, pair_sent=4) is None
    refusal = send(sender, pair_sent=5)
    assert refusal is not None and refusal.code == "pair_budget"
    assert "pair_budget_per_hour 5" in refusal.reason
    assert code(send(sender, pair_sent=6)) == "pair_budget"


def test_the_pair_budget_is_the_senders_not_the_targets() -> None:
    target = bob(MessagingPolicy(pair_budget_per_hour=0))
    assert send(alice(), target, pair_sent=5) is None


# --- send to a remote target: only the sender's rules ----------------------------------------------


def remote_target(key: str = "") -> Party:
    return Party(["peer:spark/research", "peer:spark/research/default"], key=key)


def test_a_send_to_a_peer_needs_a_peer_pattern_in_allow() -> None:
    assert code(send(alice(MessagingPolicy(allow=("*",))), remote_target())) == "not_allowed"
    assert send(alice(MessagingPolicy(allow=("peer:spark/*",))), remote_target()) is None


def test_a_send_to_a_peer_applies_the_senders_hop_limit_and_budget() -> None:
    sender = alice(MessagingPolicy(allow=("peer:*",), max_hops=3, pair_budget_per_hour=2))
    assert send(sender, remote_target(), hops=3, pair_sent=1) is None
    assert code(send(sender, remote_target(), hops=4)) == "hop_limit"
    assert code(send(sender, remote_target(), pair_sent=2)) == "pair_budget"


def test_a_waiting_send_to_a_peer_session_in_the_chain_would_deadlock() -> None:
    target = remote_target(key="gw-b:20260101_000000_eeeeee")
    assert code(send(target=target, chain=("gw-b:20260101_000000_eeeeee",), waits=True)) == "would_deadlock"


# --- arrival ---------------------------------------------------------------------------------------


def test_an_arrival_is_let_in_by_a_matching_peer_pattern_in_accept() -> None:
    target = bob(MessagingPolicy(accept=("peer:spark/*",)))
    assert arrival("peer:spark/research", target) is None
    refusal = arrival("peer:other/x", target)
    assert refusal is not None and refusal.code == "not_allowed"
    assert "peer:other/x" in refusal.reason


def test_an_arrival_matches_accept_on_the_peer_name_alone() -> None:
    assert arrival("peer:spark/research", bob(MessagingPolicy(accept=("peer:spark",)))) is None


def test_an_arrival_is_not_held_to_an_allow_list() -> None:
    # the target's own allow is empty and the sender has no policy here: its gateway applied its allow
    assert arrival("peer:spark/research", bob(MessagingPolicy())) is None


def test_an_arrival_past_the_targets_max_hops_is_refused() -> None:
    target = bob(MessagingPolicy(max_hops=3))
    assert arrival("peer:spark/research", target, hops=3) is None
    assert code(arrival("peer:spark/research", target, hops=4)) == "hop_limit"


def test_an_arrival_whose_chain_holds_the_target_would_deadlock_without_waits() -> None:
    refusal = arrival("peer:spark/research", bob(), chain=("gw-b:x", BOB_KEY), waits=False)
    assert code(refusal) == "would_deadlock"
    assert arrival("peer:spark/research", bob(), chain=("gw-b:x",)) is None


def test_an_arrival_is_not_held_to_a_pair_budget() -> None:
    assert arrival("peer:spark/research", bob(MessagingPolicy(pair_budget_per_hour=0)), pair_sent=99) is None


# --- the order of checks ---------------------------------------------------------------------------


def test_a_send_breaking_every_rule_reports_them_in_the_documented_order() -> None:
    """self_send, not_allowed (allow), not_allowed (accept), hop_limit, would_deadlock, pair_budget."""
    strict = MessagingPolicy(allow=(), accept=("nobody",), max_hops=1, pair_budget_per_hour=1)
    facts: dict[str, Any] = {"hops": 5, "chain": (BOB_KEY,), "waits": True, "pair_sent": 1}

    assert code(send(bob(strict), bob(strict), **facts)) == "self_send"

    refusal = send(alice(strict), bob(strict), **facts)
    assert refusal is not None and refusal.code == "not_allowed" and "session_messaging.allow" in refusal.reason

    allowed = MessagingPolicy(allow=("*",), max_hops=1, pair_budget_per_hour=1)
    refusal = send(alice(allowed), bob(strict), **facts)
    assert refusal is not None and refusal.code == "not_allowed" and "accept list" in refusal.reason

    accepting = MessagingPolicy(max_hops=1)
    assert code(send(alice(allowed), bob(accepting), **facts)) == "hop_limit"
    assert code(send(alice(allowed), bob(accepting), **{**facts, "hops": 1})) == "would_deadlock"
    assert code(send(alice(allowed), bob(accepting), **{**facts, "hops": 1, "chain": ()})) == "pair_budget"
    assert send(alice(allowed), bob(accepting), hops=1, chain=(BOB_KEY,), waits=False, pair_sent=0) is None


def test_an_arrival_breaking_every_rule_reports_accept_then_hops_then_deadlock() -> None:
    strict = MessagingPolicy(accept=("nobody",), max_hops=1)
    facts: dict[str, Any] = {"hops": 5, "chain": (BOB_KEY,)}
    assert code(arrival("peer:spark/x", bob(strict), **facts)) == "not_allowed"
    assert code(arrival("peer:spark/x", bob(MessagingPolicy(max_hops=1)), **facts)) == "hop_limit"
    assert code(arrival("peer:spark/x", bob(MessagingPolicy(max_hops=1)), **{**facts, "hops": 1})) == "would_deadlock"


# --- matches, local_names, remote_names ------------------------------------------------------------


def test_a_local_pattern_never_reaches_a_peer_address() -> None:
    assert not matches(["*"], ["peer:spark", "peer:spark/research"])
    assert not matches(["peer*"], ["peer:spark"])  # starts with "peer" but not "peer:"
    assert not matches(["*spark*"], ["peer:spark/research"])


def test_a_peer_pattern_never_reaches_a_local_address() -> None:
    assert not matches(["peer:*"], ["research", "research/20260101_000000_aaaaaa"])


def test_a_peer_pattern_reaches_peer_addresses() -> None:
    assert matches(["peer:*"], ["peer:spark/research"])
    assert matches(["peer:spark/*"], ["peer:spark/research"])
    assert not matches(["peer:spark/*"], ["peer:sparkle/research"])


def test_matches_is_case_sensitive() -> None:
    assert matches(["Research"], ["Research"])
    assert not matches(["research"], ["Research"])
    assert not matches(["peer:Spark/*"], ["peer:spark/research"])


def test_matches_is_any_pattern_over_any_name() -> None:
    assert matches(["nope", "b*"], ["x", "bob"])
    assert not matches([], ["bob"])
    assert not matches(["bob"], [])


def test_a_bot_chat_answers_to_its_profile_name_too() -> None:
    assert local_names("bob", "20260101_000000_bbbbbb", bot_chat=True) == ["bob", "bob/20260101_000000_bbbbbb"]
    assert local_names("bob", "20260101_000000_bbbbbb", bot_chat=False) == ["bob/20260101_000000_bbbbbb"]


def test_a_remote_address_answers_to_its_peer_name_too() -> None:
    assert remote_names("peer:spark/research") == ["peer:spark", "peer:spark/research"]
    assert remote_names("peer:spark") == ["peer:spark"]
    assert remote_names("human:api") == ["human:api"]


def test_party_shown_is_its_first_name() -> None:
    assert Party(["bob", "bob/x"]).shown == "bob"
    assert Party([]).shown == "?"


# --- send to a peer that waits on us: would_deadlock from our own records ---------------------------


def peer_target(profile: str | None = "research") -> Party:
    return Party(["peer:spark/research"] if profile else ["peer:spark", "peer:spark/default"])


@pytest.mark.parametrize("profile", ["research", None])
def test_a_waiting_send_to_a_peer_that_waits_on_us_would_deadlock_naming_the_peer(profile: str | None) -> None:
    refusal = send(target=peer_target(profile), waits=True, waited_on=True)
    assert refusal == Refusal("would_deadlock", f"peer:spark {DEADLOCK_ADVICE}")


def test_a_send_that_does_not_wait_on_a_peer_waiting_on_us_is_let_through() -> None:
    assert send(target=peer_target(), waits=False, waited_on=True) is None


def test_a_waiting_send_to_a_peer_not_waiting_on_us_is_let_through() -> None:
    assert send(target=peer_target(), waits=True, waited_on=False) is None


def test_the_pair_budget_is_reported_before_a_peer_waiting_on_us() -> None:
    spent = MessagingPolicy(allow=("peer:*",), pair_budget_per_hour=1)
    refusal = send(alice(spent), peer_target(), waits=True, waited_on=True, pair_sent=1)
    assert code(refusal) == "pair_budget"


def test_an_arrival_is_not_refused_for_a_peer_waiting_on_us() -> None:
    assert arrival("peer:spark/research", waited_on=True, waits=True) is None


# --- targets: what an agent may see and message of a profile ----------------------------------------

BOT = "20260101_000000_b0b0b0"
OTHER = "20260101_000000_cccccc"
OWN = "20260101_000000_aaaaaa"


def test_targets_list_the_bot_chat_and_the_sessions_the_allow_list_names() -> None:
    found = targets(alice(), "bob", OPEN, [(BOT, True), (OTHER, False)])
    assert found == [Target("bob", BOT, bot_chat=True), Target(f"bob/{OTHER}", OTHER, bot_chat=False)]


def test_targets_list_a_bot_chat_not_made_yet_when_the_profile_is_allowed() -> None:
    assert targets(alice(), "bob", OPEN, [(OTHER, False)]) == [
        Target("bob", None, bot_chat=True),
        Target(f"bob/{OTHER}", OTHER, bot_chat=False),
    ]


def test_targets_are_only_what_the_allow_list_names() -> None:
    whole_profile = MessagingPolicy(allow=("bob",))
    assert targets(alice(whole_profile), "bob", OPEN, [(BOT, True), (OTHER, False)]) == [
        Target("bob", BOT, bot_chat=True),
        Target(f"bob/{OTHER}", OTHER, bot_chat=False),
    ]
    only_bot_chat = MessagingPolicy(allow=(f"bob/{BOT}",))
    assert targets(alice(only_bot_chat), "bob", OPEN, [(BOT, True), (OTHER, False)]) == [
        Target("bob", BOT, bot_chat=True)
    ]
    assert targets(alice(MessagingPolicy(allow=())), "bob", OPEN, [(BOT, True), (OTHER, False)]) == []
    assert targets(alice(MessagingPolicy(allow=("peer:*",))), "bob", OPEN, [(OTHER, False)]) == []


def test_targets_of_a_profile_whose_accept_list_refuses_the_sender_are_none() -> None:
    refusing = MessagingPolicy(accept=("carol",))
    assert targets(alice(), "bob", refusing, [(BOT, True), (OTHER, False)]) == []
    accepting = MessagingPolicy(accept=("alice",))
    assert targets(alice(), "bob", accepting, [(BOT, True)]) == [Target("bob", BOT, bot_chat=True)]


def test_targets_never_list_the_senders_own_session() -> None:
    found = targets(alice(), "alice", OPEN, [(OWN, True), (OTHER, False)])
    assert found == [Target(f"alice/{OTHER}", OTHER, bot_chat=False)]
