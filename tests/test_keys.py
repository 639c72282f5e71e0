"""Idempotency keys directly (DESIGN section 4): who makes which, reserved prefixes, and fingerprints."""

from __future__ import annotations

import pytest

from backchannel import keys
from backchannel.errors import UsageError
from backchannel.ids import new_run_id

pytestmark = pytest.mark.quick  # pure: no home on disk, no process, no gateway (make quick)

RUN = "run_0123456789abcdef0123456789abcdef"

# --- check_external --------------------------------------------------------------------------------


def test_no_key_passes_as_none() -> None:
    assert keys.check_external(None) is None


@pytest.mark.parametrize("key", ["k", "x" * 255, "my-key-1", "cli-abc", "Wake:x", "a wake: later", "send-it", "autox"])
def test_a_valid_key_is_returned_as_it_is(key: str) -> None:
    assert keys.check_external(key) == key


@pytest.mark.parametrize("key", ["", "x" * 256, "a\nb", "a\rb", "\n", "trailing\n", "a\0b"])
def test_a_key_too_short_too_long_or_with_a_line_break_is_refused(key: str) -> None:
    with pytest.raises(UsageError) as caught:
        keys.check_external(key)
    assert caught.value.code == "invalid_idempotency_key"


@pytest.mark.parametrize("prefix", keys.RESERVED_PREFIXES)
def test_every_reserved_prefix_is_refused_from_outside(prefix: str) -> None:
    with pytest.raises(UsageError) as caught:
        keys.check_external(f"{prefix}{RUN}")
    assert caught.value.code == "invalid_idempotency_key"
    assert "reserved" in caught.value.message


def test_the_reserved_prefixes_are_the_ones_the_gateway_makes() -> None:
    assert set(keys.RESERVED_PREFIXES) == {"dedup:", "send:", "wake:", "a2a:", "peer:"}


@pytest.mark.parametrize(
    "key",
    [
        keys.wake(RUN),
        keys.wake_outbound(7),
        keys.agent_send(RUN, "bob", "hi", 0),
        keys.dedup(keys.fingerprint("a", "s", "m"), RUN),
        keys.a2a("peer:spark", "default", "m-1"),
        keys.of_caller("peer:spark/default", "ticket-1"),
    ],
)
def test_every_key_the_gateway_makes_is_refused_from_outside(key: str) -> None:
    with pytest.raises(UsageError):
        keys.check_external(key)


def test_an_a2a_message_id_is_a_key_per_caller_and_profile() -> None:
    mine = keys.a2a("human:a2a", "default", "m:1")
    assert keys.a2a_message_id(mine) == "m:1"
    assert len({mine, keys.a2a("peer:spark", "default", "m:1"), keys.a2a("human:a2a", "research", "m:1")}) == 3
    assert keys.a2a_message_id("cli-abc") is None


def test_an_a2a_message_ids_key_is_one_per_content_so_a_reused_id_is_another_message() -> None:
    said = keys.a2a("human:a2a", "default", "m:1", content='{"parts": ["hello"]}')
    assert said == keys.a2a("human:a2a", "default", "m:1", content='{"parts": ["hello"]}')  # an exact repeat
    assert said != keys.a2a("human:a2a", "default", "m:1", content='{"parts": ["goodbye"]}')
    assert keys.a2a_message_id(said) == "m:1"


# --- fingerprint -----------------------------------------------------------------------------------


def test_the_same_words_from_the_same_sender_to_the_same_session_fingerprint_equal() -> None:
    assert keys.fingerprint("human:api", "s1", "hello") == keys.fingerprint("human:api", "s1", "hello")


@pytest.mark.parametrize(
    "other",
    [("human:cli", "s1", "hello"), ("human:api", "s2", "hello"), ("human:api", "s1", "hello!")],
)
def test_the_fingerprint_differs_when_sender_session_or_message_differs(other: tuple[str, str, str]) -> None:
    assert keys.fingerprint("human:api", "s1", "hello") != keys.fingerprint(*other)


@pytest.mark.parametrize(
    ("one", "two"),
    [
        (("a", "bc", "m"), ("ab", "c", "m")),
        (("a", "b", "cm"), ("a", "bc", "m")),
        (("", "ab", "m"), ("ab", "", "m")),
    ],
)
def test_moving_a_separator_does_not_collide(one: tuple[str, str, str], two: tuple[str, str, str]) -> None:
    assert keys.fingerprint(*one) != keys.fingerprint(*two)


# --- agent_send ------------------------------------------------------------------------------------


def test_an_agent_send_key_is_stable_for_the_same_inputs() -> None:
    assert keys.agent_send(RUN, "bob", "hi", 0) == keys.agent_send(RUN, "bob", "hi", 0)


@pytest.mark.parametrize(
    "other",
    [
        ("run_ffffffffffffffffffffffffffffffff", "bob", "hi", 0),  # a later turn always sends
        (RUN, "carol", "hi", 0),
        (RUN, "bob", "hi!", 0),
        (RUN, "bob", "hi", 1),  # the same words twice in one turn are two messages
    ],
)
def test_an_agent_send_key_differs_by_run_target_message_and_ordinal(other: tuple[str, str, str, int]) -> None:
    assert keys.agent_send(RUN, "bob", "hi", 0) != keys.agent_send(*other)


def test_an_agent_send_key_does_not_collide_when_target_and_message_trade_characters() -> None:
    assert keys.agent_send(RUN, "bo", "bhi", 0) != keys.agent_send(RUN, "bob", "hi", 0)


def test_ordinals_that_share_digits_give_different_keys() -> None:
    assert len({keys.agent_send(RUN, "bob", "hi", n) for n in (1, 11, 111)}) == 3


def test_an_agent_send_key_is_reserved() -> None:
    key = keys.agent_send(RUN, "bob", "hi", 0)
    assert key.startswith(keys.SEND)
    assert not keys.is_wake(key)


# --- for_peer --------------------------------------------------------------------------------------


@pytest.mark.parametrize("gateway_id", ["local", "gw-1a2b3c4d", "spark"])
def test_a_key_sent_to_a_peer_is_never_reserved_and_passes_the_peers_check(gateway_id: str) -> None:
    for key in (keys.agent_send(RUN, "peer:spark/x", "hi", 0), keys.wake(RUN), "k"):
        sent = keys.for_peer(gateway_id, key)
        assert not sent.startswith(keys.RESERVED_PREFIXES)
        assert keys.check_external(sent) == sent  # the peer takes it as a caller's key


@pytest.mark.parametrize("gateway_id", ["auto", "send", "wake"])
def test_a_key_sent_to_a_peer_is_not_reserved_whatever_the_gateway_id(gateway_id: str) -> None:
    sent = keys.for_peer(gateway_id, keys.agent_send(RUN, "peer:spark/x", "hi", 0))
    assert not sent.startswith(keys.RESERVED_PREFIXES)


def test_the_same_key_from_two_gateways_differs() -> None:
    key = keys.agent_send(RUN, "peer:spark/x", "hi", 0)
    assert keys.for_peer("gw-a", key) != keys.for_peer("gw-b", key)


def test_for_peer_keeps_different_keys_different() -> None:
    assert keys.for_peer("gw-a", "k1") != keys.for_peer("gw-a", "k2")


# --- dedup ------------------------------------------------------------------------------------------


def test_a_dedup_key_names_its_run_so_two_runs_never_share_one() -> None:
    fp = keys.fingerprint("human:api", "s1", "hello")
    one, two = new_run_id(), new_run_id()
    assert keys.dedup(fp, one) != keys.dedup(fp, two)
    assert one.removeprefix("run_") in keys.dedup(fp, one)
    assert keys.dedup(fp, one).startswith(keys.AUTO)


def test_a_dedup_key_carries_its_fingerprint() -> None:
    run = new_run_id()
    one = keys.dedup(keys.fingerprint("human:api", "s1", "hello"), run)
    two = keys.dedup(keys.fingerprint("human:api", "s1", "bye"), run)
    assert one != two


# --- wake and is_wake ------------------------------------------------------------------------------


def test_a_wake_key_is_one_per_run() -> None:
    assert keys.wake(RUN) == keys.wake(RUN)
    assert keys.wake(RUN) != keys.wake("run_ffffffffffffffffffffffffffffffff")
    assert keys.wake(RUN) != keys.wake_outbound(1)
    assert keys.wake_outbound(1) != keys.wake_outbound(2)


def test_is_wake_knows_the_wake_keys_and_nothing_else() -> None:
    assert keys.is_wake(keys.wake(RUN))
    assert keys.is_wake(keys.wake_outbound(3))
    for key in (keys.agent_send(RUN, "bob", "hi", 0), keys.dedup("0" * 64, RUN), keys.cli(), "my wake:key", "WAKE:x"):
        assert not keys.is_wake(key)


# --- cli -------------------------------------------------------------------------------------------


def test_a_cli_key_is_fresh_for_every_invocation() -> None:
    assert len({keys.cli() for _ in range(50)}) == 50


def test_a_cli_key_is_a_valid_external_key() -> None:
    key = keys.cli()
    assert not key.startswith(keys.RESERVED_PREFIXES)
    assert keys.check_external(key) == key
