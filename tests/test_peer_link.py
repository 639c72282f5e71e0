"""The core's seam to other gateways (`net.link.PeerLink`): a fake link, answering only typed values, drives
`Outbound` (the ledger, settling, following, probing); and the Hermes dialect read into those values."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Self

import pytest

from backchannel.core.gateway import Gateway
from backchannel.errors import GatewayError, NoEventStream, PeerAuthRefused, PeerError, PeerUnreachable
from backchannel.events import Chunk, Event, event_of
from backchannel.home import peers as registry
from backchannel.net import wire
from backchannel.net.a2a_card import AgentCard
from backchannel.net.link import PeerAbout, PeerLink
from backchannel.outcome import Outcome, Result, Run, of_run, said_state
from backchannel.states import RunState
from now import now

pytestmark = pytest.mark.sqlite  # the home's own state.db


class FakeLink:
    """A peer that answers from scripts: nothing of either wire, only `Result`, `Run`, `Event`."""

    def __init__(self, to: str, script: Script) -> None:
        self.to = to
        self.script = script

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def about(self, *, timeout: float = 10, strict: bool = False) -> PeerAbout:
        if self.script.about_error is not None:
            raise self.script.about_error
        return PeerAbout(answered=True, platform="backchannel", version="9", gateway_id="gw-fake")

    async def health(self) -> PeerAbout:
        return PeerAbout()

    async def dm(self, message: str, *, wait: float, key: str, **_: Any) -> Result:
        self.script.sent.append(message)
        return Result(
            Outcome.RECEIPT, self.to, run_id="run_far", session_id="s_far", state="queued", idempotency_key=key
        )

    async def start(self, message: str, *, key: str, **_: Any) -> Result:
        return await self.dm(message, wait=0, key=key)

    async def status(self, run_id: str) -> Run | None:
        answer = self.script.statuses.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def stop(self, run_id: str) -> Run:
        return Run(RunState.CANCELLED, run_id=run_id, error="stopped", code="cancelled")

    async def events(self, run_id: str) -> AsyncIterator[Event]:
        for event in self.script.events:
            yield event
        if self.script.stream_error is not None:
            raise self.script.stream_error


class Script:
    def __init__(self) -> None:
        self.sent: list[str] = []
        self.statuses: list[Run | BaseException | None] = []
        self.events: list[Event] = []
        self.stream_error: BaseException | None = None
        self.about_error: BaseException | None = None


class FakeLinks:
    def __init__(self, script: Script) -> None:
        self.script = script

    def link(self, peer: registry.Peer, agent: str | None) -> PeerLink:
        return FakeLink(f"peer:{peer.name}" + (f"/{agent}" if agent else ""), self.script)

    async def card(self, peer: registry.Peer, *, timeout: float) -> AgentCard:
        raise PeerError("no card here")


@pytest.fixture
def gateway(initialised: Path) -> Any:
    registry.save(initialised, "spark", url="http://127.0.0.1:9", key="key-of-spark", note=None)
    gateway = Gateway(initialised)
    script = Script()
    gateway.outbound.links = FakeLinks(script)
    yield gateway, script
    now(gateway.aclose())


def test_a_message_to_a_peer_is_recorded_and_settled_from_typed_answers(gateway: Any) -> None:
    gw, script = gateway
    spark = gw.outbound.peer("spark")
    script.statuses = [Run(RunState.COMPLETED, run_id="run_far", session_id="s_far", output="all done")]

    async def go() -> tuple[Result, Result]:
        receipt = await gw.outbound.dm(spark, None, "status?", wait=1, key="k-1")
        status, _found = await gw.outbound.status(spark, "run_far")
        return receipt, status

    receipt, status = asyncio.run(go())
    assert script.sent == ["status?"]
    assert (receipt.outcome, receipt.run_id) == (Outcome.RECEIPT, "run_far")
    assert (status.outcome, status.reply, status.to) == (Outcome.DELIVERED, "all done", "peer:spark")
    row = now(gw.outbound.sent_with_key("k-1"))
    assert row is not None and (row.state, row.reply) == ("delivered", "all done")
    assert registry.load(gw.root, "spark").gateway_id == "gw-fake", "a Backchannel peer's id is learnt"


def test_a_run_the_peer_does_not_know_is_unknown(gateway: Any) -> None:
    gw, script = gateway
    script.statuses = [None]
    result, found = asyncio.run(gw.outbound.status(gw.outbound.peer("spark"), "run_gone"))
    assert found is None
    assert (result.outcome, result.code) == (Outcome.UNKNOWN, "run_not_found")


def test_following_rides_out_a_broken_stream_and_a_peer_away_for_a_moment(gateway: Any) -> None:
    gw, script = gateway
    script.events = [event_of({"event": "run.running", "status": "running"}), Chunk("run_far", "par")]
    script.stream_error = NoEventStream("the stream is gone")
    script.statuses = [PeerUnreachable("down a moment"), Run(RunState.RUNNING), Run(RunState.COMPLETED, output="x")]

    async def go() -> list[Event]:
        return [e async for e in gw.outbound.follow(gw.outbound.peer("spark"), "run_far")]

    names = [(e.name, e.to_dict().get("status")) for e in asyncio.run(go())]
    assert names == [
        ("run.running", "running"),
        ("message.delta", None),
        ("peer.reconnecting", None),
        ("peer.reconnected", "running"),
    ]


def test_following_stops_at_a_refused_key(gateway: Any) -> None:
    gw, script = gateway
    script.stream_error = PeerAuthRefused("our key is refused")

    async def go() -> None:
        async for _ in gw.outbound.follow(gw.outbound.peer("spark"), "run_far"):
            pass

    with pytest.raises(PeerAuthRefused):
        asyncio.run(go())


@pytest.mark.parametrize(
    ("error", "state"),
    [(PeerAuthRefused("no"), "refused"), (PeerUnreachable("down"), "down"), (PeerError("odd"), "failed")],
)
def test_a_probe_tells_the_errors_apart_by_their_class(gateway: Any, error: PeerError, state: str) -> None:
    gw, script = gateway
    script.about_error = error
    answer = asyncio.run(gw.outbound.probe("spark", timeout=5))
    assert (answer.state, answer.detail) == (state, error.message)


# --- the Hermes dialect read into typed values -----------------------------------------------------


def test_a_queued_chat_answer_is_a_receipt_and_a_held_one_held() -> None:
    queued = {"object": "hermes.session.chat.queued", "status": "queued", "run_id": "r1", "queue_position": 2}
    result = wire.chat_result(queued, to="a/s1", session_id="s1", key="k")
    assert result is not None
    assert (result.outcome, result.run_id, result.queue_position, result.session_id) == (Outcome.RECEIPT, "r1", 2, "s1")
    held = wire.chat_result({**queued, "status": "held"}, to="a/s1", session_id="s1", key="k")
    assert held is not None and held.outcome is Outcome.HELD


def test_the_send_result_envelope_says_the_outcome_itself() -> None:
    body = {
        "object": "hermes.peer.send_result",
        "result": "refused",
        "status": "refused",
        "delivery_id": None,
        "reason": "hop_limit",
        "error": "too many hops",
    }
    result = wire.chat_result(body, to="peer:spark", session_id="s1", key="k")
    assert result is not None
    assert (result.outcome, result.code, result.error) == (Outcome.REFUSED, "hop_limit", "too many hops")
    assert wire.chat_result({"object": "something.else"}, to="x", session_id=None, key=None) is None


def test_a_run_object_parsed_and_rendered_keeps_its_outcome() -> None:
    body = {"object": "hermes.run", "run_id": "r9", "status": "cancelled", "session_id": "s9", "profile": "a"}
    run = wire.run_of(body, coded=True)
    assert run.state is RunState.CANCELLED and run.code == "cancelled", "a peer's uncoded failure: its state"
    assert wire.run_of(body).code is None, "the gateway's own run: as it says"
    ours = {  # the gateway's own run, whole, as its run routes answer (dialect.Run)
        **body,
        **{"created_at": 1.0, "updated_at": 2.0, "started_at": 1.5, "finished_at": 2.0, "attempts": 1, "hops": 0},
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "cost_usd": 0.0},
        "consumed": None,  # it ended unread
    }
    result = wire.gateway_run({**ours, "error": "stopped on request", "code": "cancelled"})
    assert result.to == "a/s9"
    shown = result.to_dict()
    assert (shown["result"], shown["run_id"], shown["error"]) == (
        "failed",
        "r9",
        {"code": "cancelled", "message": "stopped on request"},
    )


def test_a_gateway_run_of_another_shape_is_an_error_that_names_its_first_difference() -> None:
    with pytest.raises(GatewayError, match=r"\(profile: Field required\): restart the gateway"):
        wire.gateway_run({"object": "hermes.run", "run_id": "r9", "status": "queued", "session_id": "s9"})


def test_of_run_is_the_one_way_from_a_run_to_a_result() -> None:
    done = of_run("a/s", Run(RunState.COMPLETED, run_id="r", output=None), key="k")
    assert (done.outcome, done.reply, done.idempotency_key) == (Outcome.DELIVERED, "", "k")
    pending = of_run("a/s", Run(RunState.RUNNING, run_id="r", error="ignored", code="ignored", queue_position=None))
    assert (pending.outcome, pending.code, pending.error) == (Outcome.RECEIPT, None, None)
    denied = of_run("a/s", Run(RunState.DENIED, error="not today", code="denied"))
    assert (denied.outcome, denied.code, denied.error) == (Outcome.REFUSED, "denied", "not today")


def test_a_peer_run_state_is_read_in_our_words_and_one_it_does_not_know_is_unknown_but_kept_as_said() -> None:
    """A peer's words map onto our run states once, at the wire: a Hermes run `started` or `stopping` runs, one
    `interrupted` failed (its word kept as its code), a word none of ours is the outcome `unknown`."""
    assert said_state("started") is RunState.RUNNING and said_state("stopping") is RunState.RUNNING
    interrupted = wire.run_of({"run_id": "r", "status": "interrupted"}, coded=True)
    assert (interrupted.state, interrupted.outcome, interrupted.code) == (
        RunState.FAILED,
        Outcome.FAILED,
        "interrupted",
    )
    run = wire.run_of({"run_id": "r", "status": "pondering"})
    assert run.state is Outcome.UNKNOWN and run.said["status"] == "pondering"
    assert event_of({"event": "run.completed"}).ends and not event_of({"event": "run.started"}).ends
    assert not event_of({"event": "message.delta"}).ends
