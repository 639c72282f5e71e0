"""A run's events, one union (`backchannel.events`): each event's object is what the hub has always published (the
same keys, in the same order, under the same names), `event_of` reads it back to the same event, and a name none of
ours (a peer's) is carried as it was said."""

from __future__ import annotations

from typing import Any

import pytest

from backchannel.events import Chunk, Ended, Event, Held, Other, Queued, Started, Steered, Step, event_of

pytestmark = pytest.mark.quick

T = 1700000000.25
HEAD = {"run_id": "run_1", "timestamp": T}

CASES: list[tuple[Event, dict[str, Any]]] = [
    (Started("run_1", "s1", timestamp=T), {"event": "run.started", **HEAD, "session_id": "s1"}),
    (
        Started("run_1", "s1", steered_into="run_0", timestamp=T),
        {"event": "run.started", **HEAD, "session_id": "s1", "steered_into": "run_0"},
    ),
    (Chunk("run_1", "par", timestamp=T), {"event": "message.delta", **HEAD, "delta": "par"}),
    (
        Step("run_1", "tool.started", "memory", preview='{"note": "x"}', timestamp=T),
        {"event": "tool.started", **HEAD, "tool": "memory", "preview": '{"note": "x"}'},
    ),
    (
        Step("run_1", "tool.completed", "memory", duration=0.012, error="no such note", timestamp=T),
        {"event": "tool.completed", **HEAD, "tool": "memory", "duration": 0.012, "error": "no such note"},
    ),
    (Steered("run_1", "run_2", timestamp=T), {"event": "turn.steered", **HEAD, "steered_run": "run_2"}),
    (
        Ended("run_1", "completed", "the reply", session_id="s1", timestamp=T),
        {"event": "run.completed", **HEAD, "session_id": "s1", "output": "the reply"},
    ),
    (
        Ended("run_1", "failed", "part", "boom", "engine_error", "s1", timestamp=T),
        {"event": "run.failed", **HEAD, "session_id": "s1", "error": "boom", "code": "engine_error", "output": "part"},
    ),
    (
        Ended("run_1", "cancelled", None, "stopped", "cancelled", "s1", timestamp=T),
        {"event": "run.cancelled", **HEAD, "session_id": "s1", "error": "stopped", "code": "cancelled", "output": None},
    ),
    (Queued("run_1", 2, timestamp=T), {"event": "run.queued", **HEAD, "runs_ahead": 2}),
    (Held("run_1", timestamp=T), {"event": "run.held", **HEAD}),
    (
        Other("run_1", "stream.closed", {"code": "key_revoked", "error": "revoked"}, timestamp=T),
        {"event": "stream.closed", **HEAD, "code": "key_revoked", "error": "revoked"},
    ),
]


@pytest.mark.parametrize(("event", "said"), CASES, ids=[e.name for e, _ in CASES])
def test_each_event_is_its_object_and_reads_back_the_same(event: Event, said: dict[str, Any]) -> None:
    assert list(event.to_dict().items()) == list(said.items())  # the keys in their order: the JSON as it was
    assert event_of(said) == event
    assert event.ends is isinstance(event, Ended)


def test_a_completed_run_with_no_reply_says_an_empty_output() -> None:
    assert Ended("run_1", "completed", session_id="s1").to_dict()["output"] == ""


def test_an_event_of_a_name_none_of_ours_is_carried_as_said() -> None:
    event = event_of({"event": "peer.reconnecting", "run_id": "r", "error": "down", "extra": [1]})
    assert isinstance(event, Other) and event.name == "peer.reconnecting" and event.error == "down"
    assert not event.ends
    assert {k: v for k, v in event.to_dict().items() if k != "timestamp"} == {
        "event": "peer.reconnecting",
        "run_id": "r",
        "error": "down",
        "extra": [1],
    }
    running = event_of({"event": "run.running", "status": "running"})  # not an end: a state on the way
    assert isinstance(running, Other) and not running.ends and running.run_id == ""


@pytest.mark.parametrize("name", ["run.completed", "run.failed", "run.expired", "run.denied", "run.interrupted"])
def test_a_run_state_that_settles_it_is_its_end_in_a_peer_words_too(name: str) -> None:
    event = event_of({"event": name})
    assert isinstance(event, Ended) and event.ends and event.name == name


def test_a_peer_event_missing_its_fields_still_reads() -> None:
    step = event_of({"event": "tool.started"})
    assert isinstance(step, Step) and step.tool == "" and step.error is None
    chunk = event_of({"event": "message.delta", "delta": None})
    assert isinstance(chunk, Chunk) and chunk.text == ""
    assert isinstance(event_of({}), Other)
