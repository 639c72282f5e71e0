"""Session to session: allowlists, accept, mentions, deadlock, hop limit, pair budget, wake on reply, ledger."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from backchannel.core.delivery.admission import Attempt
from backchannel.core.delivery.delivery import Delivered
from backchannel.core.gateway import Gateway
from backchannel.home import config
from backchannel.store.runs import RunState, pending_wakes
from conftest import run_cli, with_gateway
from scripted_model import ScriptedModel


def set_messaging(root: Path, profile: str, **settings: Any) -> None:
    path = root / "profiles" / profile / "config.yaml"
    data = config.load_yaml(path)
    data["agent"]["session_messaging"].update(settings)
    config.write_yaml(path, data)


def make_profiles(root: Path, *names: str, base_url: str | None = None) -> None:
    for name in names:
        args = ["profile", "create", name]
        if base_url:
            args += ["--engine", "openai", "--base-url", base_url, "--model", "scripted"]
        assert run_cli(*args).exit_code == 0
        (root / "profiles" / name / "SOUL.md").write_text(f"You are agent {name.upper()}.\n")


async def ask(gw: Gateway, profile: str, message: str, wait: float = 10) -> Delivered:
    """The person writes into the profile's Bot Chat and waits for the answer."""
    session = await gw.directory.open_bot_chat(profile)
    return await gw.delivery.deliver(Attempt.handed_in(session, message, "human:api"), wait=wait)


async def bot_chat(gw: Gateway, profile: str) -> list[Any]:
    return await gw.directory.messages((await gw.directory.bot_chat(profile)).id)


async def tool_results(gw: Gateway, profile: str) -> list[dict[str, Any]]:
    return [json.loads(m.content) for m in await bot_chat(gw, profile) if m.role == "tool"]


def who(body: dict[str, Any]) -> str:
    """Which agent a scripted request is for, read from its system prompt (SOUL.md)."""
    return body["messages"][0]["content"].split("agent ", 1)[1][0].lower()


def last_user(body: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def answered_tools(body: dict[str, Any]) -> bool:
    return body["messages"][-1]["role"] == "tool"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def test_refused_by_default_then_allowed_and_answered_in_the_targets_own_context(initialised: Path) -> None:
    def script(body: dict[str, Any]) -> Any:
        me = who(body)
        if me == "a" and not answered_tools(body):
            return call("send_to_session", session_id="b", message="what is your name?")
        if me == "a":
            return "A got: " + body["messages"][-1]["content"]
        return f"I am B; my memory says: {body['messages'][0]['content'].count('blue')} blue"

    with ScriptedModel(script) as model:
        make_profiles(initialised, "a", "b", base_url=model.base_url)
        (initialised / "profiles/b/memories/MEMORY.md").write_text("favourite colour blue\n")

        async def body(gw: Gateway) -> None:
            await ask(gw, "a", "ask b")
            refused = (await tool_results(gw, "a"))[-1]
            assert refused["error"]["code"] == "not_allowed"
            assert not await gw.directory.sessions("b")  # nothing was delivered, not even a Bot Chat made
            set_messaging(initialised, "a", allow=["b"])  # picked up without a restart
            done = await ask(gw, "a", "ask b again")
            result = (await tool_results(gw, "a"))[-1]
            assert result["result"] == "delivered"
            assert result["reply"] == "I am B; my memory says: 1 blue"
            assert "I am B" in (done.run.reply or "")
            b_chat = await bot_chat(gw, "b")
            assert b_chat[0].content.startswith("[Message from session a/")
            assert "another agent, not your user" in b_chat[0].content
            assert b_chat[1].content.startswith("I am B")
            ledger = await gw.delivery.ledger("a", "b")
            assert [e.state for e in ledger] == ["completed", "refused:not_allowed"]
            assert ledger[0].hops == 1 and ledger[0].wait_seconds == 120

        with_gateway(initialised, body)
        b_request = next(r for r in model.requests if who(r) == "b")
        assert "You are agent B" in b_request["messages"][0]["content"]


def test_accept_list_of_the_target_is_enforced(initialised: Path) -> None:
    make_profiles(initialised, "a", "b", "c")
    set_messaging(initialised, "a", allow=["c"])
    set_messaging(initialised, "b", allow=["c"])
    set_messaging(initialised, "c", accept=["a"])

    async def body(gw: Gateway) -> None:
        await ask(gw, "a", "/send c hello from a")
        assert (await tool_results(gw, "a"))[-1]["result"] == "delivered"
        await ask(gw, "b", "/send c hello from b")
        refused = (await tool_results(gw, "b"))[-1]["error"]
        assert refused["code"] == "not_allowed" and "accept" in refused["message"]

    with_gateway(initialised, body)


def test_mentions_answered_and_refused_in_place(initialised: Path) -> None:
    make_profiles(initialised, "a", "b", "c")
    set_messaging(initialised, "a", allow=["b"])

    async def body(gw: Gateway) -> None:
        done = await ask(gw, "a", "@session:b @session:c what is the status?")
        reply = done.run.reply or ""
        assert reply.startswith("a (echo): what is the status?")
        # each reply framed as the other agent's (the echo engine drops the opening frame line it reads)
        assert "\nb (echo): what is the status?\n[End of the message from session b/" in reply
        assert "@session:c was refused (not_allowed)" in reply
        b_chat = await bot_chat(gw, "b")
        assert b_chat[0].content.startswith("[Message from session a/")
        assert b_chat[0].content.endswith("what is the status?")
        assert "@session" not in b_chat[0].content

    with_gateway(initialised, body)


def test_a_three_way_wait_cycle_is_refused_at_once(initialised: Path) -> None:
    make_profiles(initialised, "a", "b", "c")
    set_messaging(initialised, "a", allow=["b"])
    set_messaging(initialised, "b", allow=["c"])
    set_messaging(initialised, "c", allow=["a"])

    async def body(gw: Gateway) -> None:
        done = await ask(gw, "a", "/send b /send c /send a are you there?", wait=30)
        assert done.run.state is RunState.COMPLETED
        c_result = (await tool_results(gw, "c"))[-1]["error"]
        assert c_result["code"] == "would_deadlock"
        assert "Answer it instead of asking" in c_result["message"]
        assert [e.state for e in await gw.delivery.ledger("c", "a")] == ["refused:would_deadlock"]

    with_gateway(initialised, body)


def test_a_session_cannot_message_itself(initialised: Path) -> None:
    make_profiles(initialised, "a")
    set_messaging(initialised, "a", allow=["a"])

    async def body(gw: Gateway) -> None:
        await ask(gw, "a", "/send a hello me")
        assert (await tool_results(gw, "a"))[-1]["error"]["code"] == "self_send"

    with_gateway(initialised, body)


def ping_pong_script(counter: itertools.count[int]) -> Callable[[dict[str, Any]], Any]:
    def script(body: dict[str, Any]) -> Any:
        me = who(body)
        if answered_tools(body):
            return f"{me} done"
        return call(
            "send_to_session", session_id="b" if me == "a" else "a", message=f"ping {next(counter)}", wait_seconds=0
        )

    return script


async def quiesce(gw: Gateway) -> None:
    """Until nothing in the ledger is still queued or running, and no ended run still owes its sender a wake
    (between a run's end and its wake-up run, nothing is queued: the exchange has not stopped yet)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        busy = any(e.state in ("queued", "running") for e in await gw.delivery.ledger(limit=10_000))
        if not busy and not await pending_wakes(gw.db):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the exchange did not stop")


async def agent_sent(gw: Gateway) -> list[Any]:
    """Ledger entries of runs an agent sent (not the person's, not refusals, not replies woken into a sender)."""
    return [
        e
        for e in await gw.delivery.ledger(limit=10_000)
        if not e.sender.startswith("human:")
        and e.run_id
        and not e.message.startswith("[Reply to your message")
        and not e.state.startswith("refused")
    ]


def test_async_ping_pong_stops_at_the_hop_limit(initialised: Path) -> None:
    with ScriptedModel(ping_pong_script(itertools.count())) as model:
        make_profiles(initialised, "a", "b", base_url=model.base_url)
        for name in ("a", "b"):
            set_messaging(initialised, name, allow=["a", "b"], max_hops=4, pair_budget_per_hour=1000)

        async def body(gw: Gateway) -> None:
            await ask(gw, "a", "start the ping pong")
            await quiesce(gw)
            sent = await agent_sent(gw)
            assert sent and max(e.hops for e in sent) == 4
            refusals = {e.state for e in await gw.delivery.ledger() if e.state.startswith("refused")}
            assert refusals == {"refused:hop_limit"}

        with_gateway(initialised, body)


def test_pair_budget_stops_a_ping_pong_under_a_high_hop_limit(initialised: Path) -> None:
    with ScriptedModel(ping_pong_script(itertools.count())) as model:
        make_profiles(initialised, "a", "b", base_url=model.base_url)
        for name in ("a", "b"):
            set_messaging(initialised, name, allow=["a", "b"], max_hops=1000, pair_budget_per_hour=3)

        async def body(gw: Gateway) -> None:
            await ask(gw, "a", "start")
            await quiesce(gw)
            pairs = Counter((e.sender.split("/")[0], e.target.split("/")[0]) for e in await agent_sent(gw))
            assert pairs and all(count <= 3 for count in pairs.values()), pairs
            assert any(e.state == "refused:pair_budget" for e in await gw.delivery.ledger())
            # A person's new message starts a new exchange with a fresh budget.
            before = pairs[("a", "b")]
            await ask(gw, "a", "start again")
            await quiesce(gw)
            after = Counter((e.sender.split("/")[0], e.target.split("/")[0]) for e in await agent_sent(gw))
            assert after[("a", "b")] > before

        with_gateway(initialised, body)


def test_wake_on_reply_after_a_receipt(initialised: Path) -> None:
    def script(body: dict[str, Any]) -> Any:
        me = who(body)
        if me == "b":
            return {"content": "B's slow answer", "delay": 0.6}
        if "[Reply to your message" in last_user(body):
            return "A read the late reply"
        if answered_tools(body):
            return "A will wait"
        return call("send_to_session", session_id="b", message="slow question", wait_seconds=0.1)

    with ScriptedModel(script) as model:
        make_profiles(initialised, "a", "b", base_url=model.base_url)
        set_messaging(initialised, "a", allow=["b"])

        async def body(gw: Gateway) -> None:
            await ask(gw, "a", "ask b something slow")
            receipt = (await tool_results(gw, "a"))[-1]
            assert receipt["result"] == "receipt" and "do not resend" in receipt["detail"]
            assert "do not answer in the other agent's place" in receipt["note"]  # what a small model needs told
            await quiesce(gw)
            a_chat = await bot_chat(gw, "a")
            wake = [m for m in a_chat if m.role == "user" and "[Reply to your message" in m.content]
            assert len(wake) == 1
            assert receipt["run_id"] in wake[0].content and "B's slow answer" in wake[0].content
            assert a_chat[-1].content == "A read the late reply"
            checked = await gw.delivery.status(receipt["run_id"])
            assert checked.run.state is RunState.COMPLETED and checked.result.outcome == "delivered"

        with_gateway(initialised, body)


def test_check_list_and_cancel_tools(initialised: Path) -> None:
    make_profiles(initialised, "a", "b", "c")
    set_messaging(initialised, "a", allow=["b", "b/*"])

    async def body(gw: Gateway) -> None:
        await gw.directory.create_session("b", title="design notes")
        send = {"session_id": "b", "message": "/sleep 5\nslow", "wait_seconds": 0}
        await ask(gw, "a", f"/tool send_to_session {json.dumps(send)}")
        receipt = (await tool_results(gw, "a"))[-1]
        assert receipt["result"] == "receipt"
        await ask(gw, "a", f"/tool check_message {json.dumps({'run_id': receipt['run_id']})}")
        assert (await tool_results(gw, "a"))[-1]["state"] in ("queued", "running")
        await ask(gw, "a", f"/tool cancel_message {json.dumps({'run_id': receipt['run_id']})}")
        cancelled = (await tool_results(gw, "a"))[-1]
        assert cancelled["result"] == "failed" and cancelled["state"] == "cancelled", cancelled
        await ask(gw, "a", "/tool list_sessions {}")
        listed = (await tool_results(gw, "a"))[-1]["sessions"]
        titles = {s["title"] for s in listed}
        assert titles == {"Bot Chat", "design notes"}
        assert all(s["address"].startswith("b") for s in listed)
        await ask(gw, "a", '/tool check_message {"run_id": "run_nope"}')
        assert (await tool_results(gw, "a"))[-1]["error"]["code"] in ("not_found", "run_not_found")

    with_gateway(initialised, body)


def test_unknown_address_names_what_was_tried(initialised: Path) -> None:
    make_profiles(initialised, "a")
    set_messaging(initialised, "a", allow=["*"])

    async def body(gw: Gateway) -> None:
        await ask(gw, "a", "/send ghost hello")
        error = (await tool_results(gw, "a"))[-1]["error"]
        assert error["code"] == "not_found" and "ghost" in error["message"]
        await ask(gw, "a", "/send a/b/c hello")
        assert (await tool_results(gw, "a"))[-1]["error"]["code"] == "invalid_address"

    with_gateway(initialised, body)


def test_cli_send_and_ledger(initialised: Path) -> None:
    make_profiles(initialised, "research", "builds")
    sent = run_cli("send", "builds", "is the build green?", "--json")
    assert sent.exit_code == 0, sent.stderr
    assert json.loads(sent.stdout)["reply"] == "builds (echo): is the build green?"
    assert run_cli("send", "research", "/send builds status?").exit_code == 0
    ledger = json.loads(run_cli("ledger", "research", "builds", "--json").stdout)
    assert [e["state"] for e in ledger] == ["refused:not_allowed"]
    assert ledger[0]["sender"].startswith("research/") and ledger[0]["target"] == "builds"
    everything = run_cli("ledger")
    assert "refused (not_allowed)" in everything.stdout and "human:cli" in everything.stdout
    assert run_cli("send", "nobody", "hi").exit_code == 2
    assert run_cli("send", "a/b/c", "hi").exit_code == 2
    assert run_cli("send", "builds", "/fail broken").exit_code == 1
    receipt = run_cli("send", "builds", "/sleep 1\nslow", "--wait", "0.1", "--json")
    assert receipt.exit_code == 0 and json.loads(receipt.stdout)["state"] in ("queued", "running")
    assert run_cli("ledger", "not/a/valid/address").exit_code == 2


def test_a_later_turn_sending_the_same_words_sends_again(initialised: Path) -> None:
    """An agent asking `b` "status?" in one turn and again in a later one gets two answers, never a replay."""
    make_profiles(initialised, "a", "b")
    set_messaging(initialised, "a", allow=["b"])

    async def body(gw: Gateway) -> None:
        await ask(gw, "a", "/send b status?\nmorning check")
        await ask(gw, "a", "/send b status?\nevening check")
        first, second = (await tool_results(gw, "a"))[-2:]
        assert first["result"] == second["result"] == "delivered", (first, second)
        assert first["run_id"] != second["run_id"]
        assert not second["replayed"]
        received = [m.content for m in await bot_chat(gw, "b") if m.role == "user"]
        assert len(received) == 2 and all(m.endswith("\nstatus?") for m in received), received

    with_gateway(initialised, body)


def test_a_turn_rerun_after_an_interruption_does_not_send_twice(initialised: Path) -> None:
    """The same turn's send (same run, target, text and ordinal) is filed under one key: a re-run replays it."""
    make_profiles(initialised, "a", "b")
    set_messaging(initialised, "a", allow=["b"])
    asked: list[str] = []

    async def interrupted(gw: Gateway) -> None:
        session = await gw.directory.open_bot_chat("a")
        message = Attempt.handed_in(session, "/send b /sleep 3\nslow question", "human:api", key="once")
        sent = await gw.delivery.submit(message)
        asked.append(sent.run.id)
        deadline = time.monotonic() + 5
        while not [m for m in await gw.delivery.ledger("a", "b") if m.state == "running"]:
            assert time.monotonic() < deadline, "b never started"
            await asyncio.sleep(0.02)
        # The gateway stops while a's turn waits on b: both turns are cut and go back to the queue.

    with_gateway(initialised, interrupted, grace=0)

    async def rerun(gw: Gateway) -> None:
        done = await gw.delivery.wait(asked[0], 15)
        assert done.run.state is RunState.COMPLETED and done.run.attempts == 2, done.run
        result = (await tool_results(gw, "a"))[-1]
        assert result["result"] == "delivered" and result["replayed"], result
        received = [m.content for m in await bot_chat(gw, "b") if m.role == "user"]
        assert len(received) == 1, received  # b got the question once, and answered it once
        sends = [e for e in await gw.delivery.ledger("a", "b") if e.run_id]
        assert len(sends) == 1 and sends[0].state == "completed", sends

    with_gateway(initialised, rerun)
