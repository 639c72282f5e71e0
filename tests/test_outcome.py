"""The outcome vocabulary (DESIGN section 11) directly: run states to outcomes, exit codes, and Result shapes."""

from __future__ import annotations

import pytest

from backchannel.outcome import Outcome, Result, of_state, refused, said_state
from backchannel.states import RunState

pytestmark = pytest.mark.quick  # pure: no home on disk, no process, no gateway (make quick)

# --- of_state, and a peer's words read by said_state ---------------------------------------------------------


def said(word: str) -> Outcome:
    """A state word as a peer (or a ledger line) says it: read in our vocabulary, then its outcome."""
    return of_state(said_state(word))


@pytest.mark.parametrize(
    ("state", "outcome"),
    [
        (RunState.HELD, Outcome.HELD),
        (RunState.QUEUED, Outcome.RECEIPT),
        (RunState.RUNNING, Outcome.RECEIPT),
        (RunState.COMPLETED, Outcome.DELIVERED),
        (RunState.FAILED, Outcome.FAILED),
        (RunState.CANCELLED, Outcome.FAILED),
        (RunState.EXPIRED, Outcome.FAILED),
        (RunState.DENIED, Outcome.REFUSED),
    ],
)
def test_every_run_state_has_its_outcome(state: RunState, outcome: Outcome) -> None:
    assert of_state(state) is outcome


@pytest.mark.parametrize("state", ["queued", "running", "started", "stopping", "sending"])
def test_a_pending_run_is_a_receipt(state: str) -> None:
    assert said(state) is Outcome.RECEIPT


def test_a_completed_run_is_delivered() -> None:
    assert said("completed") is Outcome.DELIVERED


@pytest.mark.parametrize("state", ["failed", "cancelled", "expired", "interrupted"])
def test_a_run_that_ended_without_a_reply_failed(state: str) -> None:
    assert said(state) is Outcome.FAILED


def test_a_held_message_the_person_denied_is_refused() -> None:
    assert said("denied") is Outcome.REFUSED


def test_a_held_run_is_held() -> None:
    assert said("held") is Outcome.HELD


@pytest.mark.parametrize("outcome", list(Outcome))
def test_an_outcomes_own_name_stands_for_itself(outcome: Outcome) -> None:
    assert said(outcome.value) is outcome


@pytest.mark.parametrize("state", ["", "done", "COMPLETED", "Queued", "completed ", "replied", "pending"])
def test_any_other_state_is_unknown(state: str) -> None:
    assert said(state) is Outcome.UNKNOWN


# --- exit codes and settled ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "exit_code"),
    [
        (Outcome.DELIVERED, 0),
        (Outcome.RECEIPT, 0),
        (Outcome.HELD, 0),
        (Outcome.FAILED, 1),
        (Outcome.UNKNOWN, 1),
        (Outcome.REFUSED, 2),
    ],
)
def test_each_outcome_has_its_documented_exit_code(outcome: Outcome, exit_code: int) -> None:
    assert outcome.exit_code == exit_code


@pytest.mark.parametrize(
    ("outcome", "settled"),
    [
        (Outcome.DELIVERED, True),
        (Outcome.REFUSED, True),
        (Outcome.FAILED, True),
        (Outcome.RECEIPT, False),  # the reply is still coming
        (Outcome.HELD, False),  # the person has not decided yet
        (Outcome.UNKNOWN, False),  # the request may have arrived: ask again
    ],
)
def test_settled_is_true_only_when_nothing_more_will_happen(outcome: Outcome, settled: bool) -> None:
    assert outcome.settled is settled


def test_the_vocabulary_is_exactly_the_six_outcomes() -> None:
    assert {o.value for o in Outcome} == {"delivered", "receipt", "held", "refused", "failed", "unknown"}


# --- Result.to_dict --------------------------------------------------------------------------------


def test_a_delivered_result_carries_the_reply_and_no_error() -> None:
    body = Result(Outcome.DELIVERED, "bob", run_id="run_1", session_id="s1", state="completed", reply="hi").to_dict()
    assert body == {
        "result": "delivered",
        "to": "bob",
        "run_id": "run_1",
        "session_id": "s1",
        "state": "completed",
        "replayed": False,
        "reply": "hi",
    }


def test_a_delivered_result_without_text_still_has_a_reply_string() -> None:
    body = Result(Outcome.DELIVERED, "bob").to_dict()
    assert body["reply"] == ""
    assert "error" not in body


def test_a_delivered_result_never_shows_an_error_even_with_a_code() -> None:
    body = Result(Outcome.DELIVERED, "bob", reply="hi", code="x", error="y").to_dict()
    assert "error" not in body
    assert "partial_output" not in body


@pytest.mark.parametrize("outcome", [Outcome.RECEIPT, Outcome.HELD])
def test_a_receipt_or_hold_says_do_not_resend_and_gives_the_queue_position(outcome: Outcome) -> None:
    body = Result(outcome, "bob", run_id="run_1", queue_position=3).to_dict()
    assert body["result"] == outcome.value
    assert body["queue_position"] == 3
    assert "do not resend" in body["detail"]
    assert body["run_id"] == "run_1"
    assert "reply" not in body
    assert "error" not in body


@pytest.mark.parametrize("outcome", [Outcome.RECEIPT, Outcome.HELD])
def test_a_receipt_or_hold_keeps_its_queue_position_key_when_it_is_unknown(outcome: Outcome) -> None:
    body = Result(outcome, "bob", run_id="run_1").to_dict()
    assert "queue_position" in body and body["queue_position"] is None


@pytest.mark.parametrize("outcome", [Outcome.REFUSED, Outcome.FAILED, Outcome.UNKNOWN])
def test_an_unsuccessful_result_has_an_error_with_code_and_message(outcome: Outcome) -> None:
    body = Result(outcome, "bob", code="hop_limit", error="too far").to_dict()
    assert body["error"] == {"code": "hop_limit", "message": "too far"}
    assert "reply" not in body
    assert "detail" not in body
    assert "queue_position" not in body


@pytest.mark.parametrize("outcome", [Outcome.REFUSED, Outcome.FAILED, Outcome.UNKNOWN])
def test_the_error_code_defaults_to_the_outcome_name(outcome: Outcome) -> None:
    body = Result(outcome, "bob").to_dict()
    assert body["error"]["code"] == outcome.value
    assert body["error"]["message"]  # never empty: there is always something to read


def test_a_failed_result_that_kept_output_shows_it_as_partial_output() -> None:
    body = Result(Outcome.FAILED, "bob", state="cancelled", reply="half an ans", code="cancelled").to_dict()
    assert body["partial_output"] == "half an ans"
    assert "reply" not in body


def test_a_failed_result_without_output_has_no_partial_output() -> None:
    assert "partial_output" not in Result(Outcome.FAILED, "bob", reply=None).to_dict()
    assert "partial_output" not in Result(Outcome.FAILED, "bob", reply="").to_dict()


@pytest.mark.parametrize("outcome", list(Outcome))
def test_none_fields_are_left_out(outcome: Outcome) -> None:
    body = Result(outcome, "bob").to_dict()
    for name in ("run_id", "session_id", "state", "idempotency_key", "partial_output"):
        assert name not in body
    assert "waited" not in body  # not part of the compact shape
    assert body["to"] == "bob"
    assert body["result"] == outcome.value


@pytest.mark.parametrize("outcome", list(Outcome))
def test_the_idempotency_key_is_shown_only_when_set(outcome: Outcome) -> None:
    assert Result(outcome, "bob", idempotency_key="k-1").to_dict()["idempotency_key"] == "k-1"
    assert "idempotency_key" not in Result(outcome, "bob").to_dict()


@pytest.mark.parametrize("outcome", list(Outcome))
def test_replayed_is_always_present(outcome: Outcome) -> None:
    assert Result(outcome, "bob").to_dict()["replayed"] is False
    assert Result(outcome, "bob", replayed=True).to_dict()["replayed"] is True


def test_refused_builds_a_refused_result_with_its_code_and_reason() -> None:
    result = refused("peer:spark/x", "would_deadlock", "answer instead")
    assert result.outcome is Outcome.REFUSED
    assert result.to_dict() == {
        "result": "refused",
        "to": "peer:spark/x",
        "replayed": False,
        "error": {"code": "would_deadlock", "message": "answer instead"},
    }
